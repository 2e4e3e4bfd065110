import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa, ResultPromise } from 'execa';
import { LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import { freePort } from '../../lib/network';
import { startImageServer } from '../support/imageServer';
import { requestSse } from '../support/sse';
import { killVms } from '../../sandbox/state/runtime';
import { freePorts } from '../../sandbox/testkit';

/**
 * `npm start` on a machine with nothing configured: it must come up with its own
 * Temporal dev server (UI included) and the sandbox cluster, say so in its first lines,
 * serve the API, and keep history across a restart (SQLite in DATA_DIR).
 */

const REPO = path.resolve(__dirname, '..', '..');
let dir: string;
let images: Awaited<ReturnType<typeof startImageServer>>;
let env: Record<string, string>;
let ports: { api: number; temporal: number; ui: number };
const started: ResultPromise[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-start-'));
  images = await startImageServer();
  ports = { api: await freePort(), temporal: await freePort(), ui: await freePort() };
  env = {
    PORT: String(ports.api),
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    TEMPORAL_DEV_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    VM_SSH_PORT: String(await freePort()),
    SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
    SANDBOX_BOOT_DELAY_MS: '300',
    ...images.env,
  };
});

afterAll(async () => {
  // A failed expectation leaves its `npm start` running: jest would wait for it forever.
  for (const c of started) if (c.exitCode === null) c.kill('SIGTERM');
  killVms(path.join(dir, 'data', 'sandbox'));
  await images?.stop();
  if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `npm start` until it prints the line naming the task queue (its last banner line). */
async function start(): Promise<{ child: ResultPromise; output: () => string }> {
  const child = execa('npm', ['start'], {
    cwd: REPO,
    // Only what a newcomer's shell would have: none of the test run's settings.
    env: { PATH: process.env.PATH!, HOME: process.env.HOME!, ...env },
    extendEnv: false,
    all: true,
    reject: false,
  });
  started.push(child);
  let out = '';
  child.all!.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 120_000;
  while (!out.includes('Task queue:')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, output: () => out };
}

async function stop(child: ResultPromise): Promise<void> {
  child.kill('SIGTERM');
  const result = await child;
  expect(result.exitCode).toBe(0);
}

test('npm start brings up the API, the Temporal UI and the sandbox, and history survives a restart', async () => {
  const first = await start();
  const lines = first.output().split('\n').filter((l) => !l.startsWith('>') && l.trim() !== '');
  expect(lines[0]).toMatch(/SANDBOX MODE/);
  expect(first.output()).toContain(`API:         http://127.0.0.1:${ports.api}/api`);
  expect(first.output()).toContain(`Temporal UI: http://127.0.0.1:${ports.ui}`);

  expect(await (await fetch(`http://127.0.0.1:${ports.api}/api/health`)).text()).toBe('ok');
  const ui = await fetch(`http://127.0.0.1:${ports.ui}/`);
  expect(ui.status).toBe(200);
  expect(await ui.text()).toMatch(/<html/i);

  const res = await requestSse(`http://127.0.0.1:${ports.api}/api/vm/install`, { body: { os: 'debian', version: '12' } });
  expect(res.events.at(-1)?.message).toBe('[*] User: debian');
  const workflowId = res.headers['x-workflow-id'] as string;

  // Every route, admin ones included, answers where the API listens: loopback only.
  const { stdout: listening } = await execa('ss', ['-Htln', `sport = :${ports.api}`]);
  expect(listening.trim().split('\n').map((l) => l.trim().split(/\s+/)[3])).toEqual([`127.0.0.1:${ports.api}`]);
  // History and its log are private to the service's user (test/e2e/devServer.private.test.ts: in a DATA_DIR of mode 755 too).
  const data = path.join(dir, 'data');
  const modes = Object.fromEntries(
    fs.readdirSync(data).filter((f) => f.startsWith('temporal.')).map((f) => [f, (fs.statSync(path.join(data, f)).mode & 0o777).toString(8)]),
  );
  expect(Object.keys(modes)).toEqual(expect.arrayContaining(['temporal.db', 'temporal.log']));
  expect(modes).toEqual(Object.fromEntries(Object.keys(modes).map((f) => [f, '600'])));
  // The embedded UI shows history and changes nothing: no write actions, and a terminate is refused.
  const settings = (await (await fetch(`http://127.0.0.1:${ports.ui}/api/v1/settings`)).json()) as { DisableWriteActions?: boolean };
  expect(settings.DisableWriteActions).toBe(true);
  const terminate = await fetch(`http://127.0.0.1:${ports.ui}/api/v1/namespaces/default/workflows/${workflowId}/terminate`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ reason: 'from the UI' }),
  });
  expect(terminate.status).toBe(405);
  await stop(first.child);

  // Nothing of the sandbox is left listening: its node sshds are gone.
  const again = await start();
  const { stdout } = await execa(LOCAL_CLI_PATH, ['workflow', 'describe', '--workflow-id', workflowId, '--address', `127.0.0.1:${ports.temporal}`]);
  expect(stdout).toMatch(/Completed|COMPLETED/);
  // The VM created before the restart is still in the cluster.
  const status = await requestSse(`http://127.0.0.1:${ports.api}/api/workflows/${workflowId}/events`);
  expect(status.events.at(-1)?.message).toBe('[*] User: debian');
  await stop(again.child);
}, 300_000);
