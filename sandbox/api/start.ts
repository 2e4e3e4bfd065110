import { spawn } from 'node:child_process';
import path from 'node:path';
import { clusterPaths } from '../state/paths';
import { readCertificate } from './cert';
import { authHeader, ensureDefaultToken, type ApiToken } from './access';
import { lowerPriority } from '../priority';

export interface SandboxApiOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** Delay of every 401 answer; PVE's is 3000 ms. */
  authFailureDelayMs?: number;
}

export interface SandboxApi {
  /** `https://127.0.0.1:<port>`: what PROXMOX_API_URL would be. */
  url: string;
  port: number;
  /** The certificate (PEM), to trust as a CA file. */
  certPem: string;
  /** Its SHA-256 fingerprint `AB:CD:...`, to pin. */
  fingerprint: string;
  /** root@pam's token (no privilege separation): every privilege. */
  token: ApiToken;
  /** `PVEAPIToken=root@pam!sandbox=<secret>` */
  authorization: string;
  /** The server process. */
  pid: number;
  stop(): Promise<void>;
}

/** Starts the REST API server of the cluster in `dir` (sandbox/api/server.ts) as a child process. */
export async function startApiServer(srcDir: string, dir: string, hostName: string, o: SandboxApiOptions = {}): Promise<SandboxApi> {
  const token = ensureDefaultToken(dir);
  const host = o.host ?? '127.0.0.1';
  const child = spawn(process.execPath, [path.join(srcDir, 'tsrun.js'), path.join(srcDir, 'api', 'server.ts'), dir, host, String(o.port ?? 0), String(o.authFailureDelayMs ?? 3000), hostName], {
    env: { ...process.env, PVE_SANDBOX_DIR: dir },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  lowerPriority(child.pid);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(/ready (\d+)/.exec(d.toString())?.[1])));
    child.once('exit', (code) => reject(new Error(`sandbox API server exited with ${code} before listening`)));
  });
  // The server made it before listening, when missing.
  const cert = readCertificate(clusterPaths(dir).apiDir);
  return {
    url: `https://${host}:${port}`,
    port,
    certPem: cert.certPem,
    fingerprint: cert.fingerprint,
    token,
    authorization: authHeader(token),
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
