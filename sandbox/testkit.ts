import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import https from 'node:https';
import path from 'node:path';
import { Client } from 'ssh2';
import { generateEd25519 } from './sshKeys';
import { startSandboxCluster, type SandboxCluster, type SandboxClusterOptions } from './cluster';

/**
 * Helpers for tests that use the sandbox cluster: a throw-away cluster on free loopback
 * ports with a fresh root key, and a small SSH client. Test-only; the service does not
 * import this module.
 */

export interface KeyPair {
  /** OpenSSH private key (PEM text), usable by ssh2 and, written 0600, by ssh(1). */
  privateKey: string;
  /** `ssh-ed25519 AAAA... comment` */
  publicKey: string;
  /** The private key written to a 0600 file, for `ssh -i`. */
  file: string;
}

export function makeKeyPair(dir: string, name: string, comment = `${name}@sandbox-test`): KeyPair {
  const pair = generateEd25519(comment);
  const file = path.join(dir, name);
  fs.writeFileSync(file, pair.private, { mode: 0o600 });
  fs.writeFileSync(`${file}.pub`, pair.public.trim() + '\n');
  return { privateKey: pair.private, publicKey: pair.public.trim(), file };
}

function portFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/** `count` consecutive free ports on 127.0.0.1 (random base, so parallel test files differ). */
export async function freePorts(count: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    // Below Linux's ephemeral range (32768+): a port free now could otherwise be taken by
    // an outgoing connection before the sshd binds it.
    const base = 12000 + Math.floor(Math.random() * 20000);
    let ok = true;
    for (let i = 0; i < count && ok; i++) ok = await portFree(base + i);
    if (ok) return base;
  }
  throw new Error('no free ports');
}

export interface TestCluster {
  cluster: SandboxCluster;
  tmp: string;
  rootKey: KeyPair;
  vmSshPort: number;
  /** Stops the cluster and removes its directory. */
  dispose(): Promise<void>;
}

export async function startTestCluster(o: Partial<SandboxClusterOptions> = {}): Promise<TestCluster> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-sandbox-'));
  const rootKey = makeKeyPair(tmp, 'root_key', 'root@main-node');
  const base = await freePorts(4);
  const cluster = await startSandboxCluster({
    dir: path.join(tmp, 'cluster'),
    vmSshPort: base + 3,
    sshPortBase: base,
    bootDelayMs: 300,
    rootAuthorizedKey: rootKey.publicKey,
    ...o,
  });
  return {
    cluster,
    tmp,
    rootKey,
    vmSshPort: o.vmSshPort ?? base + 3,
    async dispose() {
      await cluster.stop();
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

export interface SshResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

/** Runs one command over SSH with ssh2 (optionally feeding stdin); rejects if the login fails. */
export function sshExec(o: { host: string; port: number; username: string; privateKey: string; command: string; stdin?: string; timeoutMs?: number }): Promise<SshResult> {
  return new Promise((resolve, reject) => {
    const conn = new Client();
    const timer = setTimeout(() => {
      conn.end();
      reject(new Error(`ssh ${o.username}@${o.host}:${o.port} timed out`));
    }, o.timeoutMs ?? 20_000);
    conn
      .on('ready', () => {
        conn.exec(o.command, (err, stream) => {
          if (err) {
            clearTimeout(timer);
            conn.end();
            return reject(err);
          }
          let stdout = '';
          let stderr = '';
          let code: number | null = null;
          stream.on('data', (d: Buffer) => (stdout += d.toString()));
          stream.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          stream.on('exit', (c: number | null) => (code = c));
          stream.on('close', () => {
            clearTimeout(timer);
            conn.end();
            resolve({ stdout, stderr, code });
          });
          if (o.stdin !== undefined) stream.end(o.stdin);
          else stream.end();
        });
      })
      .on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      })
      .connect({ host: o.host, port: o.port, username: o.username, privateKey: o.privateKey, readyTimeout: 10_000 });
  });
}

/** Polls until `fn` resolves (not rejects), like a client waiting for a guest's sshd. */
export async function eventually<T>(fn: () => Promise<T>, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }
}

/**
 * The value `check` gives once it is truthy: `eventually` for a check that answers instead
 * of throwing. A timeout names what was awaited.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 15_000,
  everyMs = 100,
): Promise<T> {
  return eventually(async () => {
    const value = await check();
    if (!value) throw new Error(`timed out waiting for ${what}`);
    return value;
  }, timeoutMs, everyMs);
}

export interface ApiAnswer {
  status: number;
  /** The status line's reason phrase: PVE puts the error message there. */
  statusMessage: string;
  /** Parsed JSON body (`{ data, message?, errors?, total? }`), undefined when there is none. */
  body: { data?: unknown; message?: string; errors?: Record<string, string>; total?: number } | undefined;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint: string;
}

/**
 * One request to a sandbox REST API over real HTTPS, trusting only its certificate (as
 * a client given it as a CA file would). Parameters go in the query string for GET and
 * DELETE, as a form body otherwise, as PVE's clients send them.
 */
export function apiRequest(
  api: { url: string; certPem: string; authorization: string },
  method: string,
  apiPath: string,
  params: Record<string, string | number | boolean> = {},
  o: { authorization?: string | null; json?: boolean } = {},
): Promise<ApiAnswer> {
  const form = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString();
  const inQuery = method === 'GET' || method === 'DELETE';
  const url = new URL(`/api2/json${apiPath}${inQuery && form ? `?${form}` : ''}`, api.url);
  const body = inQuery ? undefined : o.json ? JSON.stringify(params) : form;
  const headers: Record<string, string> = {};
  const auth = o.authorization === undefined ? api.authorization : o.authorization;
  if (auth !== null) headers.Authorization = auth;
  if (body !== undefined) {
    headers['Content-Type'] = o.json ? 'application/json' : 'application/x-www-form-urlencoded';
    headers['Content-Length'] = String(Buffer.byteLength(body));
  }
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, headers, ca: api.certPem, agent: false }, (res) => {
      const fingerprint = (res.socket as import('node:tls').TLSSocket).getPeerCertificate().fingerprint256;
      let raw = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (raw += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', body: raw ? (JSON.parse(raw) as ApiAnswer['body']) : undefined, fingerprint }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
