import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../lib/network';
import { startDevServer, type DevServer } from '../../lib/temporal/devServer';

/**
 * The embedded dev server (no TEMPORAL_ADDRESS) in a DATA_DIR the operator made open to all:
 * its history and log are still private to the service's user, and its UI shows history
 * without the buttons (and the requests) that would terminate, cancel, reset or signal.
 */

let dir: string;
let server: DevServer;
let uiPort: number;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-devserver-'));
  fs.chmodSync(dir, 0o755);
  uiPort = await freePort();
  server = await startDevServer({
    port: await freePort(),
    uiPort,
    namespace: 'default',
    dbFile: path.join(dir, 'temporal.db'),
    logFile: path.join(dir, 'temporal.log'),
  });
}, 90_000);

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('history and its log are mode 600 in a DATA_DIR of mode 755', () => {
  const modes = Object.fromEntries(fs.readdirSync(dir).map((f) => [f, (fs.statSync(path.join(dir, f)).mode & 0o777).toString(8)]));
  expect(Object.keys(modes)).toEqual(expect.arrayContaining(['temporal.db', 'temporal.log']));
  expect(modes).toEqual(Object.fromEntries(Object.keys(modes).map((f) => [f, '600'])));
});

test('the UI is read-only: its settings say so, and a terminate is refused before it reaches Temporal', async () => {
  expect(server.uiUrl).toBe(`http://127.0.0.1:${uiPort}`);
  const settings = (await (await fetch(`${server.uiUrl}/api/v1/settings`, { headers: { 'Accept-Encoding': 'gzip' } })).json()) as Record<string, unknown>;
  expect(settings).toMatchObject({ DisableWriteActions: true });
  for (const [method, p] of [
    ['POST', '/api/v1/namespaces/default/workflows/w-1/terminate'],
    ['POST', '/api/v1/namespaces/default/workflows/w-1/cancel'],
    ['POST', '/api/v1/namespaces/default/workflows/w-1/reset'],
    ['POST', '/api/v1/namespaces/default/workflows/w-1/signal/s'],
    ['DELETE', '/api/v1/namespaces/default/schedules/s-1'],
  ]) {
    const res = await fetch(`${server.uiUrl}${p}`, { method, headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect({ method, p, status: res.status }).toEqual({ method, p, status: 405 });
  }
  // Reads pass: the page, and the workflow list.
  expect((await fetch(`${server.uiUrl}/`)).status).toBe(200);
  expect((await fetch(`${server.uiUrl}/api/v1/namespaces/default/workflows`)).status).toBe(200);
});
