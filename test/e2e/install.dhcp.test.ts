import { execa } from 'execa';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { guestInterfacesOf } from '../../lib/proxmox/guestAgent';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';

/**
 * DHCP (issue 24) end to end: an install with `ip: "dhcp"` gets ipconfig0 `ip=dhcp`, its
 * address from the sandbox's DHCP stand-in (127.0.3.0/24, outside GATEWAY's /24, so the
 * VMID formula would find nothing) and learns it from the guest agent; it is SSH-ready
 * there, and a reboot and a stop/start find it again. The agent answers as qemu-server's
 * does; a bad `ip` is a 400 naming it.
 */

let h: Harness;
const VMID = 143;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);
const config = async () => parseVmConfig((await h.sandbox.readConfig(VMID))!);
const qm = (...args: string[]) => execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor('pve1') }, reject: false });

test('an install with ip "dhcp" is SSH-ready at the address its guest agent reports, outside GATEWAY\'s /24', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, ip: 'dhcp' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const ip = /^\[\*\] IP: (.+)$/.exec(res.events.at(-2)?.message ?? '')?.[1];
  expect(ip).toMatch(/^127\.0\.3\.\d+$/);
  expect(res.events.map((e) => e.message)).toEqual(
    expect.arrayContaining([`[*] VMID ${VMID}, IP by DHCP, name ${VMID}-${VMID}`, `[*] address ${ip} (from the guest agent)`, `[*] waiting for SSH on ${ip}`]),
  );
  expect(res.events.at(-3)?.message).toBe(`[*] VMID: ${VMID}`);

  const conf = await config();
  expect(conf.entries.ipconfig0).toBe('ip=dhcp');
  // The agent, as `qm guest cmd` prints it: lo first, then net0's NIC holding the lease.
  const out = await qm('guest', 'cmd', String(VMID), 'network-get-interfaces');
  expect(out.exitCode).toBe(0);
  const nics = guestInterfacesOf(JSON.parse(out.stdout));
  expect(nics[0].name).toBe('lo');
  const mac = /virtio=([0-9A-F:]+)/i.exec(String(conf.entries.net0))?.[1].toLowerCase();
  expect(nics.find((n) => n.mac === mac)?.addresses).toContainEqual({ type: 'ipv4', address: ip, prefix: 24 });

  // A reboot: the API asks the agent for the address, and SSH answers there again.
  const reboot = await requestSse(`${h.api}/vm/${VMID}/reboot`, { method: 'POST' });
  expect(reboot.status).toBe(200);
  expect(reboot.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(reboot.events.map((e) => e.message)).toContain(`[*] waiting for SSH on ${ip}`);

  // Stopped, the agent cannot answer; the start reads the address once the VM runs (the lease is kept).
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  expect(await qm('guest', 'cmd', String(VMID), 'network-get-interfaces')).toMatchObject({ exitCode: 255, stderr: expect.stringContaining(`VM ${VMID} is not running`) });
  const start = await requestSse(`${h.api}/vm/${VMID}/start`, { method: 'POST' });
  expect(start.status).toBe(200);
  expect(start.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(start.events.map((e) => e.message)).toEqual(expect.arrayContaining([`[*] reading VM ${VMID}'s address from the guest agent`, `[*] waiting for SSH on ${ip}`]));
});

test('the guest agent answers as qemu-server does: not configured, then not running', async () => {
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  expect((await qm('set', String(VMID), '--agent', '0')).exitCode).toBe(0);
  expect(await qm('guest', 'cmd', String(VMID), 'network-get-interfaces')).toMatchObject({ stderr: expect.stringContaining('No QEMU guest agent configured') });
  expect((await qm('set', String(VMID), '--agent', '1')).exitCode).toBe(0);
  expect(await qm('guest', 'cmd', String(VMID), 'network-get-interfaces')).toMatchObject({ stderr: expect.stringContaining(`VM ${VMID} is not running`) });
});

test.each<[string, unknown]>([
  ['a word', 'static'],
  ['a number', 120],
])('a bad ip (%s) is a 400 naming ip, and nothing starts', async (_name, ip) => {
  const res = await post('/vm/install', { os: 'debian', version: '12', id: 144, ip });
  expect(res.status).toBe(400);
  expect(JSON.stringify(res.json)).toMatch(/ip: must be \\"dhcp\\"/);
  expect(await h.sandbox.readConfig(144)).toBeUndefined();
});
