import fs from 'node:fs';
import path from 'node:path';
import { ApiNode } from '../../lib/proxmox/api/node';
import { PveApi } from '../../lib/proxmox/api/http';
import { startHarness, type Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { sshWorks, userKeyPair } from '../support/guest';

/**
 * API mode against a cluster still on Proxmox VE 8.4, the last release of 8, whose guest
 * agent calls want `VM.Monitor` (9 replaced it with `VM.GuestAgent.*`). The harness makes
 * the token with the 8.4 lines of docs/proxmox-api.md, run as written with that cluster's
 * pveum; a DHCP install needs the agent twice: for the address and for the host key.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ SANDBOX_PVE_VERSION: '8.4' }, { proxmoxApi: true });
});

afterAll(async () => {
  await h?.stop();
});

test('a DHCP install with the token of the 8.4 recipe: address and host key from the guest agent, SSH-ready', async () => {
  // The cluster plays 8.4, and the role the recipe made has 8.4's agent privilege.
  const s = h.config.proxmoxApi!;
  const api = new PveApi({ urls: s.urls, token: s.token, fingerprint: s.fingerprint });
  try {
    expect(await new ApiNode(api, 'pve1').version()).toMatchObject({ release: '8.4', version: '8.4.1' });
  } finally {
    api.close();
  }
  expect(s.token).toMatch(/^qemurun@pve!service=/);
  const users = JSON.parse(fs.readFileSync(path.join(h.sandbox.dir, 'sandbox', 'api', 'users.json'), 'utf8')) as { roles: Record<string, string[]> };
  expect(users.roles.QemuRun).toContain('VM.Monitor');
  expect(users.roles.QemuRun.filter((p) => p.startsWith('VM.GuestAgent.'))).toEqual([]);

  const key = userKeyPair('user@laptop');
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: 146, ip: 'dhcp', pubkey: key.publicKey } });
  expect(res.status).toBe(200);
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const ip = /^\[\*\] IP: (.+)$/.exec(res.events.at(-2)?.message ?? '')?.[1];
  expect(ip).toMatch(/^127\.0\.3\.\d+$/);
  const messages = res.events.map((e) => e.message);
  expect(messages).toContain(`[*] address ${ip} (from the guest agent)`);
  expect(messages.some((m) => /^\[\*\] host key SHA256:\S+ \(reported by the guest agent\)$/.test(m))).toBe(true);
  expect(await sshWorks(ip!, h.config.vmSshPort, 'debian', key.privateKey)).toBe(true);
});
