import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { lowerPriority } from './priority';

/**
 * Starts the cluster's resident CLI server (sandbox/cli/server.ts) and resolves once it
 * listens. It exits when `stop` is called or when this process goes away (its stdin closes).
 */
export async function startCliServer(srcDir: string, dir: string, env: Record<string, string>): Promise<{ stop(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [path.join(srcDir, 'tsrun.js'), path.join(srcDir, 'cli', 'server.ts'), dir], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  lowerPriority(child.pid);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`sandbox CLI server exited with ${code} before listening`)));
  });
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
