import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startDevServer, type DevServer } from '../../lib/temporal/devServer';

/**
 * A Temporal server a test owns and may restart: the dev server on a free port, its
 * history in an SQLite file that outlives a restart. Same shape as the real server's
 * test helper, so a suite moves from one to the other by its import.
 */
export interface TestTemporal {
  address: string;
  namespace: string;
  /** Stops the server and starts it again on the same port and history. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startDevTemporal(opts: { dataDir?: string } = {}): Promise<TestTemporal> {
  const dir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-temporal-'));
  fs.mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const namespace = 'default';
  const start = () =>
    startDevServer({
      port,
      namespace,
      dbFile: path.join(dir, 'temporal.db'),
      logFile: path.join(dir, 'temporal.log'),
    });
  let server: DevServer = await start();
  return {
    address: server.address,
    namespace,
    async restart() {
      await server.stop();
      server = await start();
    },
    stop: () => server.stop(),
  };
}
