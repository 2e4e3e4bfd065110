import { Spawner } from '../../lib/executor';

/**
 * The test process's one spawner. Kept on the global object: jest loads modules afresh
 * for each test file, and a spawner per file would fork (about 0.7 s under ts-node) and
 * then sit idle until the run ends. The product makes its own in app/service.ts.
 */
const SHARED = Symbol.for('qemurun.test.spawner');

export function testSpawner(): Spawner {
  // eslint-disable-next-line no-restricted-syntax -- shared across test files on purpose (above)
  const global = globalThis as { [SHARED]?: Spawner };
  return (global[SHARED] ??= new Spawner());
}
