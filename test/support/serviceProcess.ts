import path from 'node:path';
import { execa, type ResultPromise } from 'execa';

/**
 * The service as an operator runs it: the compiled runtime (dist/main.js) in a process of
 * its own, built first when stale, as `npm start` does. Preloading forbidTypeScript.js makes
 * loading a TypeScript compiler in that process an error.
 */

export const REPO = path.resolve(__dirname, '..', '..');
export const FORBID_TYPESCRIPT = path.join(REPO, 'test', 'fixtures', 'forbidTypeScript.js');

export async function buildIfStale(): Promise<void> {
  await execa(process.execPath, ['scripts/build.js', '--if-stale'], { cwd: REPO });
}

export interface ServiceProcess {
  child: ResultPromise<{ all: true; reject: false }>;
  pid: number;
  output(): string;
}

/** Starts dist/main.js with only `env` (and PATH, HOME); does not wait for it. */
export function spawnService(env: Record<string, string>, nodeArgs: string[] = []): ServiceProcess {
  const child = execa(process.execPath, [...nodeArgs, '--enable-source-maps', 'dist/main.js'], {
    cwd: REPO,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME!, ...env },
    extendEnv: false,
    all: true,
    reject: false,
  });
  let out = '';
  child.all.on('data', (c: Buffer) => (out += c.toString()));
  return { child, pid: child.pid!, output: () => out };
}

const SELF_INFLICTED_PORT_CLASH = /is in use by pid \d+ \((?:[^)]*sandbox\/|\S*temporal server start-dev )/;

/** Starts dist/main.js and waits for the last banner line (the task queue). */
export async function startServiceProcess(env: Record<string, string>, nodeArgs: string[] = []): Promise<ServiceProcess> {
  for (let attempt = 1; ; attempt++) {
    const service = spawnService(env, nodeArgs);
    const deadline = Date.now() + 120_000;
    while (!service.output().includes('Task queue:')) {
      if (service.child.exitCode !== null || Date.now() > deadline) {
        service.child.kill('SIGKILL');
        // The port a test found free went, in the meantime, to one of the service's own
        // children that bind any free port (the sandbox's API server, the embedded Temporal
        // dev server's HTTP and metrics ports): they are gone with the service and take
        // other ports next time. Anything else is the test's failure.
        if (attempt < 3 && service.child.exitCode !== null && SELF_INFLICTED_PORT_CLASH.test(service.output())) break;
        throw new Error(`the service did not come up:\n${service.output()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (service.output().includes('Task queue:')) return service;
    await service.child;
  }
}
