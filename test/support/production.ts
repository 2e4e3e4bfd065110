import crypto from 'node:crypto';
import { execa, type ResultPromise } from 'execa';
import { freePort } from '../../lib/network';
import { REPO, spawnService, type ServiceProcess } from './serviceProcess';

/**
 * QemuRun in its production shape, each part an OS process of its own: `npm run sandbox`
 * (the simulated cluster, reached over SSH), API processes (QEMURUN_ROLE=api) and worker
 * processes (QEMURUN_ROLE=worker), all on one Temporal server.
 */

export interface StandaloneSandbox {
  child: ResultPromise<{ reject: false }>;
  /** The KEY=value lines it printed. */
  settings: Record<string, string>;
  stop(): Promise<void>;
}

/** Runs `npm run sandbox` (scripts/sandbox.ts, the built sandbox package) and waits for its settings. */
export async function startStandaloneSandbox(env: Record<string, string>): Promise<StandaloneSandbox> {
  const child = execa(process.execPath, ['-r', 'ts-node/register/transpile-only', 'scripts/sandbox.ts'], {
    cwd: REPO,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME!, ...env },
    extendEnv: false,
    reject: false,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const deadline = Date.now() + 60_000;
  while (!stderr.includes('*** ready')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`npm run sandbox did not come up:\n${stdout}\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const settings = Object.fromEntries(
    stdout
      .split('\n')
      .filter((l) => /^[A-Z][A-Za-z0-9_]*=/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  return {
    child,
    settings,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await child;
    },
  };
}

/** Payload encryption keys every process of one deployment shares. */
export function sharedEncryptionKeys(): string {
  return `k1:${crypto.randomBytes(32).toString('base64')}`;
}

export interface RoleProcess extends ServiceProcess {
  role: 'api' | 'worker';
  /** The API's base URL (…/api) or the worker's health port URL. */
  url: string;
}

/** Starts dist/main.js in one role and waits for its banner. */
export async function startRole(role: 'api' | 'worker', env: Record<string, string>): Promise<RoleProcess> {
  const port = await freePort();
  const service = spawnService({
    ...env,
    QEMURUN_ROLE: role,
    ...(role === 'api' ? { PORT: String(port) } : { WORKER_HEALTH_PORT: String(port) }),
  });
  const deadline = Date.now() + 120_000;
  while (!service.output().includes('Task queue:')) {
    if (service.child.exitCode !== null || Date.now() > deadline) {
      service.child.kill('SIGKILL');
      throw new Error(`the ${role} did not come up:\n${service.output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { ...service, role, url: role === 'api' ? `http://127.0.0.1:${port}/api` : `http://127.0.0.1:${port}` };
}

export interface SseEvent {
  id: number;
  step: string;
  status: string;
  message: string;
}

/**
 * An event stream read as it arrives: `events` grows until the server ends the stream or
 * the connection breaks (`done` resolves either way).
 */
export function followStream(url: string, init: RequestInit = {}): { events: SseEvent[]; workflowId: Promise<string>; done: Promise<void> } {
  const events: SseEvent[] = [];
  let resolveId!: (id: string) => void;
  let rejectId!: (err: unknown) => void;
  const workflowId = new Promise<string>((resolve, reject) => {
    resolveId = resolve;
    rejectId = reject;
  });
  const done = (async () => {
    const res = await fetch(url, init);
    if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    const id = res.headers.get('x-workflow-id');
    if (id) resolveId(id);
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let idx;
        while ((idx = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          const idLine = /^id: (\d+)$/m.exec(block);
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).replace(/^ /, ''))
            .join('');
          if (idLine && data) events.push({ id: Number(idLine[1]), ...JSON.parse(data) });
        }
      }
    } catch {
      // The server went away mid-stream: what arrived is in `events`.
    }
  })();
  done.catch(rejectId);
  return { events, workflowId, done };
}
