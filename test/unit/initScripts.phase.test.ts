import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { guestActivities } from '../../activities/guest';
import type { Config } from '../../lib/config';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { startSquatter, type Squatter } from '../support/squatter';

/**
 * What runInitScript sends for each phase, read by an SSH server that records its stdin:
 * the phase only when there is one (a full run's text is what it always was), and a root
 * password only to the runs that set one (full and clone).
 */
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-phase-'));
let guest: Squatter;
beforeAll(async () => {
  guest = await startSquatter('127.0.0.1', 0);
});
afterAll(async () => {
  await guest.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const config = {
  sshKeyPath: path.join(dataDir, 'id_ed25519'),
  sshWaitTimeoutSec: 30,
  rootPassword: 'root-password-from-config',
  initScript: { timezone: 'UTC', locale: 'en_US.UTF-8', packages: ['tree'], swapSize: '0' },
} as unknown as Config;
const client = { workflow: { getHandle: () => ({ signal: async () => undefined }) } } as never;

async function sent(input: Record<string, unknown>): Promise<string> {
  guest.received = '';
  const activities = guestActivities({ config: { ...config, vmSshPort: guest.port }, client, proxmox: {} as ProxmoxCluster });
  const env = new MockActivityEnvironment({ workflowExecution: { workflowId: 'install-1', runId: 'run-1' } });
  await env.run(() => activities.runInitScript({ ip: '127.0.0.1', user: 'debian', os: 'debian', version: '12', hostKey: guest.publicKey, ...input } as never));
  return guest.received;
}

test.each([
  [undefined, false, true],
  ['template', true, false],
  ['seal', true, false],
  ['clone', true, true],
])('phase %s: QEMURUN_PHASE sent %s, root password hash sent %s', async (phase, hasPhase, hasPassword) => {
  const stdin = await sent(phase === undefined ? {} : { phase });
  expect(stdin).toContain('#!/usr/bin/env bash\n');
  expect(stdin.includes(`export QEMURUN_PHASE='${phase}'\n`)).toBe(hasPhase);
  expect(/^export QEMURUN_PHASE=/m.test(stdin)).toBe(hasPhase);
  expect(/^export QEMURUN_ROOT_PASSWORD_HASH='\$5\$/m.test(stdin)).toBe(hasPassword);
  expect(stdin).not.toContain('root-password-from-config');
});

test('a phase the script does not know fails the activity for good, before any connection', async () => {
  const before = guest.connections;
  await expect(sent({ phase: 'full' })).rejects.toMatchObject({ type: 'InvalidRequestError', nonRetryable: true, message: expect.stringContaining('phase must be template, seal or clone') });
  expect(guest.connections).toBe(before);
});
