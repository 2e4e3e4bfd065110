import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cmdline, commandName, descendants } from './proc';

/**
 * The service as an operator runs it: `npm start` in the project directory, configured by
 * its environment, with its own Temporal dev server and the sandbox cluster. The benchmark
 * measures that process from outside, as `ps` would.
 */
export interface BenchService {
  url: string;
  /** The API + worker process (the node process `npm start` runs). */
  pid: number;
  /** The Temporal dev server it started. */
  temporalPid: number;
  temporalAddress: string;
  dataDir: string;
  /** The sandbox cluster directory (call log, VM configs). */
  clusterDir: string;
  /** The sandbox nodes' sshd processes (they run the CLIs of non-main nodes). */
  sshdPids(): number[];
  /** The service's spawner (lib/executor/spawner.ts), which starts its local commands. */
  spawnerPids(): number[];
  stop(): Promise<void>;
}

export async function startBenchService(opts: {
  root: string;
  dir: string;
  env: Record<string, string>;
  port: number;
  temporalPort: number;
}): Promise<BenchService> {
  const dataDir = path.join(opts.dir, 'data');
  const log = fs.openSync(path.join(opts.dir, 'service.log'), 'a');
  const env: NodeJS.ProcessEnv = { ...process.env, ...opts.env, DATA_DIR: dataDir, PORT: String(opts.port), TEMPORAL_DEV_PORT: String(opts.temporalPort) };
  // A Temporal server or Proxmox cluster named in the caller's environment is not the one measured here.
  for (const name of ['TEMPORAL_ADDRESS', 'MAIN_NODE']) delete env[name];
  const npm: ChildProcess = spawn('npm', ['start', '--silent'], { cwd: opts.root, env, stdio: ['ignore', log, log], detached: true });
  const exited = new Promise<number | null>((resolve) => npm.once('exit', resolve));

  const url = `http://127.0.0.1:${opts.port}`;
  // npm start may build first (the Temporal CLI, compiled JavaScript): allow for it.
  const deadline = Date.now() + 300_000;
  let pid: number | undefined;
  let temporalPid: number | undefined;
  for (;;) {
    if (npm.exitCode !== null) throw new Error(`npm start exited with ${npm.exitCode}; see ${path.join(opts.dir, 'service.log')}`);
    if (Date.now() > deadline) throw new Error(`the service did not answer ${url}/api/health within 300 s`);
    const ok = await fetch(`${url}/api/health`).then((r) => r.ok, () => false);
    if (ok) {
      const tree = descendants(npm.pid!);
      pid = tree.find((p) => commandName(p) === 'node' && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('main'));
      temporalPid = tree.find((p) => commandName(p) === 'temporal');
      if (pid && temporalPid) break;
    }
    await new Promise((r) => setTimeout(r, 250));
  }

  return {
    url,
    pid,
    temporalPid,
    temporalAddress: `127.0.0.1:${opts.temporalPort}`,
    dataDir,
    clusterDir: path.join(dataDir, 'sandbox'),
    sshdPids: () => descendants(pid!).filter((p) => commandName(p) === 'sshd'),
    spawnerPids: () => descendants(pid!).filter((p) => cmdline(p).includes('spawnerProcess')),
    async stop() {
      // The service stops its sandbox and dev server itself on SIGTERM.
      process.kill(pid!, 'SIGTERM');
      const done = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30_000))]);
      if (done === 'timeout') {
        for (const p of [pid!, ...descendants(pid!)]) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
      fs.closeSync(log);
    },
  };
}
