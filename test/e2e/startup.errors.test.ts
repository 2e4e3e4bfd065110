import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { freePort } from '../../lib/network';
import { freePorts } from '../../sandbox/testkit';
import { checkPortsFree } from '../../lib/run/ports';
import { buildIfStale, spawnService } from '../support/serviceProcess';

/**
 * Expected start-up failures end the compiled service with a short message naming the cause
 * and its fix, no stack trace, and exit status 78 (a crash exits with 1).
 */

let dir: string;
let env: Record<string, string>;

beforeAll(async () => {
  await buildIfStale();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-startup-'));
  env = {
    PORT: String(await freePort()),
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
  };
}, 300_000);

afterAll(() => {
  if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

async function failedStart(overrides: Record<string, string>): Promise<{ exitCode?: number; stderr: string }> {
  const service = spawnService({ ...env, ...overrides });
  const result = await service.child;
  // Nothing may be left behind: every port is free again.
  return { exitCode: result.exitCode, stderr: String(result.stderr) };
}

function expectCleanMessage(stderr: string): void {
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr.trim().split('\n').length).toBeLessThanOrEqual(3);
}

test('a port held by another program names the port, its holder and the setting', async () => {
  const foreign = net.createServer();
  const port = await freePort();
  await new Promise<void>((resolve) => foreign.listen(port, '127.0.0.1', resolve));
  try {
    const { exitCode, stderr } = await failedStart({ PORT: String(port) });
    expect(exitCode).toBe(78);
    expect(stderr).toContain(`:${port} (the API) is in use by pid ${process.pid}`);
    expect(stderr).toContain('set PORT to a free port');
    expectCleanMessage(stderr);

    const sandbox = await failedStart({ SANDBOX_SSH_PORT_BASE: String(port - 1) });
    expect(sandbox.exitCode).toBe(78);
    expect(sandbox.stderr).toContain(`127.0.0.1:${port} (sandbox node pve2's sshd) is in use by pid ${process.pid}`);
    expect(sandbox.stderr).toContain('SANDBOX_SSH_PORT_BASE');
    expectCleanMessage(sandbox.stderr);
  } finally {
    foreign.close();
  }
});

test('a bad setting is named, with every other bad one', async () => {
  const { exitCode, stderr } = await failedStart({ PORT: 'eighty', INIT_SWAP_SIZE: 'lots' });
  expect(exitCode).toBe(78);
  expect(stderr).toContain('PORT: must be an integer');
  expect(stderr).toContain('INIT_SWAP_SIZE');
  expect(stderr).not.toMatch(/^\s+at /m);
});

test('an unreachable TEMPORAL_ADDRESS is named, with the way to use the embedded server', async () => {
  const { exitCode, stderr } = await failedStart({ TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`, MAIN_NODE: 'pve1', NODE_pve1: '127.0.0.1:1', GATEWAY: '10.0.0.1', ASSIGN_STORAGE: 'local' });
  expect(exitCode).toBe(78);
  expect(stderr).toContain('cannot reach Temporal at 127.0.0.1:');
  expect(stderr).toContain('unset TEMPORAL_ADDRESS');
  expectCleanMessage(stderr);
});

test('an unreadable SSH key names SSH_KEY_PATH', async () => {
  const keyPath = path.join(dir, 'badkey', 'id_ed25519');
  // A directory where the private key should be: it exists, with its .pub, but cannot be read.
  fs.mkdirSync(keyPath, { recursive: true });
  fs.writeFileSync(`${keyPath}.pub`, 'ssh-ed25519 AAAA test\n');
  const { exitCode, stderr } = await failedStart({ SSH_KEY_PATH: keyPath });
  expect(exitCode).toBe(78);
  expect(stderr).toContain(`SSH_KEY_PATH=${keyPath}: cannot read or create the SSH key`);
  expectCleanMessage(stderr);
});

test('a TEMPORAL_CLI_PATH that is not a program is named', async () => {
  const { exitCode, stderr } = await failedStart({ TEMPORAL_CLI_PATH: path.join(dir, 'no-such-temporal') });
  expect(exitCode).toBe(78);
  expect(stderr).toContain('TEMPORAL_CLI_PATH=');
  expectCleanMessage(stderr);
});

test('a node older than Proxmox VE 8.0 stops the start with one line naming it', async () => {
  const { exitCode, stderr } = await failedStart({ SANDBOX_PVE_VERSIONS: 'pve2=7.4-3' });
  expect(exitCode).toBe(78);
  expect(stderr).toContain('qemurun: pve2 runs Proxmox VE 7.4 (pve-manager 7.4-3); QemuRun needs Proxmox VE 8.0 or later');
  expectCleanMessage(stderr);
  // Everything started before the check (sandbox sshds, Temporal) was stopped again.
  await checkPortsFree([
    { host: '127.0.0.1', port: Number(env.TEMPORAL_DEV_PORT), setting: 'TEMPORAL_DEV_PORT', what: 'Temporal' },
    { host: '127.0.0.1', port: Number(env.SANDBOX_SSH_PORT_BASE) + 1, setting: 'SANDBOX_SSH_PORT_BASE', what: "pve2's sshd" },
  ]);
}, 180_000);

test('the production image leaves the sandbox out: without MAIN_NODE it says to set it, in one line', async () => {
  // What the Dockerfile keeps of the build: dist/ (which holds no sandbox), node_modules
  // without the sandbox package (@qemurun/sandbox), and the files it copies as they are.
  const image = path.join(dir, 'image');
  const repo = path.resolve(__dirname, '..', '..');
  fs.mkdirSync(image);
  fs.cpSync(path.join(repo, 'dist'), path.join(image, 'dist'), { recursive: true });
  expect(fs.readdirSync(path.join(image, 'dist'))).not.toContain('sandbox');
  fs.copyFileSync(path.join(repo, 'package.json'), path.join(image, 'package.json'));
  fs.mkdirSync(path.join(image, 'node_modules'));
  for (const pkg of fs.readdirSync(path.join(repo, 'node_modules'))) {
    if (pkg !== '@qemurun') fs.symlinkSync(path.join(repo, 'node_modules', pkg), path.join(image, 'node_modules', pkg));
  }
  for (const kept of ['init-scripts', 'console', 'bin']) fs.symlinkSync(path.join(repo, kept), path.join(image, kept));
  const dockerfile = fs.readFileSync(path.join(repo, 'Dockerfile'), 'utf8');
  expect(dockerfile).toMatch(/npm pkg delete workspaces devDependencies\.@qemurun\/sandbox \\\n && npm prune --omit=dev/);

  const run = await execa(process.execPath, ['dist/main.js'], { cwd: image, env: { PATH: process.env.PATH!, HOME: process.env.HOME!, ...env }, extendEnv: false, reject: false });
  expect(run.exitCode).toBe(78);
  expect(run.stderr).toContain('set MAIN_NODE and NODE_<name>');
  expect(run.stderr).toContain('MAIN_NODE is not set, and this build has no Proxmox sandbox to stand in for a cluster');
  expectCleanMessage(run.stderr);
}, 120_000);
