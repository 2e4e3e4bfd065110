import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { PveApi } from '../../lib/proxmox/api/http';
import { ApiNode } from '../../lib/proxmox/api/node';
import { freePorts } from '../../sandbox/testkit';
import { REPO_ROOT } from '../../lib/repoRoot';
import { buildIfStale } from '../support/serviceProcess';

/**
 * `npm run sandbox` (scripts/sandbox.ts) prints the settings of both ways to reach it:
 * KEY=value lines for SSH, and commented-out ones for API mode that work as printed.
 */
let dir: string;
let child: ResultPromise | undefined;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-standalone-'));
  // scripts/sandbox.ts loads the sandbox package as the service does: from its build.
  await buildIfStale();
}, 300_000);
afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await child.catch(() => undefined);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('prints the API-mode settings too, and they reach its API as printed', async () => {
  const sshBase = await freePorts(3);
  child = execa(process.execPath, ['-r', 'ts-node/register/transpile-only', 'scripts/sandbox.ts'], {
    cwd: REPO_ROOT,
    env: {
      DATA_DIR: path.join(dir, 'data'),
      SSH_KEY_PATH: path.join(dir, 'id_ed25519'),
      SANDBOX_SSH_PORT_BASE: String(sshBase),
      VM_SSH_PORT: String(sshBase + 2),
      GATEWAY: '127.0.0.1',
      // The cluster plays the last release of 8 rather than 9.
      SANDBOX_PVE_VERSION: '8.4',
      TS_NODE_TRANSPILE_ONLY: '1',
    },
    reject: false,
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const deadline = Date.now() + 90_000;
  while (!/\*\*\* ready/.test(stderr)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm run sandbox did not come up:\n${stdout}\n${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const lines = stdout.split('\n');
  // The SSH settings stay the plain KEY=value lines; API mode's are commented out.
  expect(lines.filter((l) => /^PROXMOX_API_/.test(l))).toEqual([]);
  const api = Object.fromEntries(
    lines.flatMap((l) => {
      const m = /^# (PROXMOX_API_[A-Z_]+)=(.*)$/.exec(l);
      return m ? [[m[1], m[2]]] : [];
    }),
  );
  expect(Object.keys(api).sort()).toEqual(['PROXMOX_API_FINGERPRINT', 'PROXMOX_API_TOKEN_FILE', 'PROXMOX_API_URL']);
  expect(api.PROXMOX_API_URL).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  expect(api.PROXMOX_API_FINGERPRINT).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  // No secret on the screen: the token is in a file only its owner reads.
  const token = fs.readFileSync(api.PROXMOX_API_TOKEN_FILE, 'utf8').trim();
  expect(stdout + stderr).not.toContain(token.split('=')[1]);
  expect(fs.statSync(api.PROXMOX_API_TOKEN_FILE).mode & 0o077).toBe(0);
  const pve = new PveApi({ urls: [api.PROXMOX_API_URL], token, fingerprint: api.PROXMOX_API_FINGERPRINT });
  try {
    expect(await new ApiNode(pve, 'pve2').version()).toMatchObject({ release: '8.4', version: '8.4.1' });
  } finally {
    pve.close();
  }
});
