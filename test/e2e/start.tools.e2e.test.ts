import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { freePort } from '../../lib/network';
import { EXIT_STARTUP_ERROR } from '../../lib/startupError';
import { findSandboxTools } from '../../sandbox/requirements';

/**
 * `npm start` on a machine without sshd (simulated: SANDBOX_TOOLS_PATH names a directory
 * with every sandbox tool but sshd) stops before starting anything, with one line naming
 * the package and the command that installs it, and no stack trace.
 */

const REPO = path.resolve(__dirname, '..', '..');
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-notools-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('sshd missing: one line naming openssh-server and the install command, exit status of a start-up error', async () => {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const { found } = findSandboxTools(['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']);
  for (const [command, file] of Object.entries(found)) if (command !== 'sshd') fs.symlinkSync(file, path.join(bin, command));

  const temporalPort = await freePort();
  const result = await execa('npm', ['start'], {
    cwd: REPO,
    env: {
      PATH: process.env.PATH!,
      HOME: process.env.HOME!,
      PORT: String(await freePort()),
      DATA_DIR: path.join(dir, 'data'),
      SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
      TEMPORAL_DEV_PORT: String(temporalPort),
      TEMPORAL_UI_PORT: String(await freePort()),
      SANDBOX_TOOLS_PATH: bin,
    },
    extendEnv: false,
    all: true,
    reject: false,
    timeout: 90_000,
  });
  const out = result.all ?? '';
  expect(result.exitCode).toBe(EXIT_STARTUP_ERROR);
  const ours = out.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('>') && !l.startsWith('npm '));
  expect(ours).toEqual([
    expect.stringMatching(/SANDBOX MODE/),
    `qemurun: sandbox mode needs sshd (Debian package openssh-server), not found in SANDBOX_TOOLS_PATH=${bin}: install with \`apt-get install -y openssh-server\` and unset SANDBOX_TOOLS_PATH, or point it at them.`,
  ]);
  expect(out).not.toMatch(/^\s+at /m);
  // Nothing was started: no dev server took its port, no data beyond the directory.
  expect(fs.existsSync(path.join(dir, 'data', 'temporal.db'))).toBe(false);
  expect(fs.existsSync(path.join(dir, 'ssh'))).toBe(false);
}, 120_000);
