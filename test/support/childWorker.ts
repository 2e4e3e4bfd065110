import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import type { Config } from '../../lib/config';

const REPO = path.resolve(__dirname, '..', '..');

/**
 * A worker in a process of its own (test/fixtures/apiWorker.ts), so a test can kill it
 * with SIGKILL as the OOM killer would; resolves once it polls. Wrapped in an object: an
 * async function returning the child (a thenable) would wait for its exit.
 */
export async function startChildWorker(config: Config): Promise<{ child: ResultPromise }> {
  const child = execa(process.execPath, [path.join(REPO, 'sandbox', 'tsrun.js'), path.join(REPO, 'test', 'fixtures', 'apiWorker.ts')], {
    cwd: REPO,
    env: { QEMURUN_TEST_CONFIG: JSON.stringify(config) },
    reject: false,
    stderr: 'inherit',
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('worker ready')) resolve();
    });
    void child.then((r) => reject(new Error(`the worker exited (${r.exitCode}) before it was ready: ${out}`)));
  });
  return { child };
}
