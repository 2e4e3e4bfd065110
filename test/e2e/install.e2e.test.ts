import { sshWorks, userKeyPair } from '../support/guest';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { operations, operationsMark } from '../support/proxmoxCalls';

/**
 * The install workflow end to end: real Temporal dev server, the Proxmox sandbox (pve1
 * local, pve2 over real sshd), real SSH into the guests, real HTTP and SSE.
 */

let h: Harness;

beforeAll(async () => {
  // The guest that never answers (below) costs this long; the others answer in seconds.
  h = await startHarness({ SSH_WAIT_TIMEOUT: '20' });
});

afterAll(async () => {
  await h?.stop();
});

const userKey = () => userKeyPair('user@laptop');

function canSsh(ip: string, user: string, privateKey: Buffer): Promise<boolean> {
  return sshWorks(ip, h.config.vmSshPort, user, privateKey);
}

function finalEvents(events: Array<{ step: string; status: string; message: string }>) {
  return events.slice(-4);
}

describe.each([
  ['debian', '12', 'debian'],
  ['ubuntu', '24.04', 'ubuntu'],
  ['rockylinux', '9', 'rocky'],
])('install %s %s', (os, version, defaultUser) => {
  test('streams the pipeline and ends with the seed\'s four final events; the VM answers SSH', async () => {
    const key = userKey();
    const res = await requestSse(`${h.api}/vm/install`, {
      body: { os, version, name: 'web', cpu: 2, ram: 1024, disk: '20G', pubkey: key.publicKey },
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const workflowId = res.headers['x-workflow-id'] as string;
    expect(workflowId).toMatch(/^install-/);
    expect(res.events[0].message).toContain(workflowId);
    expect(res.closed).toBe(true);
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    // A process guest has no newer kernel in /boot and no /run/reboot-required: no reboot.
    expect(res.events.filter((e) => e.step === 'VM initialization > reboot').map((e) => e.message)).toEqual([
      expect.stringMatching(/^\[\*\] no reboot needed: no newer kernel than the running \S+, no \/run\/reboot-required$/),
    ]);

    const last = finalEvents(res.events);
    expect(last.map((e) => e.step)).toEqual(Array(4).fill('VM initialization > finalizing'));
    expect(last[0].message).toMatch(/^\[\+\] VM installation completed in \d+\.\d{2}s$/);
    const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(last[1].message)?.[1]);
    expect(vmid).toBeGreaterThanOrEqual(100);
    expect(last[2].message).toBe(`[*] IP: 127.0.0.${vmid}`);
    expect(last[3].message).toBe(`[*] User: ${defaultUser}`);

    // every event has an increasing id
    const ids = res.events.map((e) => e.id);
    expect(ids).toEqual(ids.map((_, i) => i + 1));

    // the request key and the main node key both work, as the cloud-init user
    expect(await canSsh(`127.0.0.${vmid}`, defaultUser, key.privateKey)).toBe(true);
    expect(await canSsh(`127.0.0.${vmid}`, defaultUser, h.key.privateKey)).toBe(true);
    expect(await canSsh(`127.0.0.${vmid}`, defaultUser, userKey().privateKey)).toBe(false);

    const conf = await h.sandbox.readConfig(vmid);
    expect(conf).toMatch(new RegExp(`^name: web-${vmid}$`, 'm'));
    expect(conf).toMatch(/^cores: 2$/m);
    expect(conf).toMatch(/^memory: 1024$/m);
    // The default storage is a stock install's thin pool: a raw LV named as LvmThinPlugin names it.
    expect(conf).toMatch(new RegExp(`^scsi0: local-lvm:vm-${vmid}-disk-0,.*size=20G`, 'm'));
    expect(conf).toMatch(new RegExp(`^ide2: local-lvm:vm-${vmid}-cloudinit,media=cdrom`, 'm'));
    expect(conf).toMatch(new RegExp(`^ipconfig0: ip=127\\.0\\.0\\.${vmid}/24,gw=127\\.0\\.0\\.1$`, 'm'));
    // No passwd in the request: cloud-init sets no password (the injected keys only).
    expect(conf).not.toMatch(/^cipassword:/m);
    expect(conf).toMatch(new RegExp(`^tags: ${os}$`, 'm'));

    // the init script ran in the guest, and its output reached the stream
    expect(await h.sandbox.guestLog(vmid)).toMatch(/qemu-guest-agent/);
    expect(res.events.some((e) => e.step === 'VM initialization > init script' && e.status === 'processing' && !e.message.startsWith('[*] running'))).toBe(true);
    // The SSH wait asked the guest agent, through Proxmox, for the address it reports.
    expect(res.events).toContainEqual(expect.objectContaining({ step: 'VM initialization > wait for SSH', message: `[*] the guest agent reports 127.0.0.${vmid}, as configured` }));
  });
});

test('a guest that never answers SSH: the wait times out once (SshTimeoutError), and the VM is removed', async () => {
  const vmid = 239;
  h.sandbox.setGuestFault(vmid, { noSsh: true });
  try {
    const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: vmid } });
    const last = res.events.at(-1)!;
    expect([last.step, last.status]).toEqual(['VM initialization > wait for SSH', 'error']);
    expect(last.message).toMatch(new RegExp(`^\\[-\\] SSH on 127\\.0\\.0\\.${vmid}:\\d+ did not answer for debian within 20s`));
    expect(res.events.some((e) => e.message === `[*] VM ${vmid} removed`)).toBe(true);
    expect(await h.sandbox.readConfig(vmid)).toBeUndefined();
  } finally {
    h.sandbox.setGuestFault(vmid, undefined);
  }
});

test('one install asks Proxmox once to configure the VM, and looks for it in the cluster only until it knows its node', async () => {
  const mark = await operationsMark(h);
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', node: 'pve2' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const vmid = Number(/^\[\*\] VMID: (\d+)$/m.exec(res.events.map((e) => e.message).join('\n'))?.[1]);
  const ops = (await operations(h, mark)).filter((o) => o.vmid === vmid || o.op === 'GET /cluster/resources');
  const on = (op: string) => ops.filter((o) => o.op === op);
  // Every option of the install in one `qm set` (one PUT .../config), then the boot disk's resize.
  expect(on('set')).toHaveLength(1);
  expect(Object.keys(on('set')[0].params)).toEqual(expect.arrayContaining(['sshkeys', 'ciuser', 'tags', 'ide2', 'boot', 'ipconfig0']));
  expect(on('resize').map((o) => o.params)).toEqual([expect.objectContaining({ disk: 'scsi0', size: '16G' })]);
  // Once the VM exists the workflow knows where it is (where it made it, then where it moved it).
  const created = ops.findIndex((o) => o.op === 'create');
  expect(created).toBeGreaterThan(0);
  expect(ops.slice(created).filter((o) => o.op === 'GET /cluster/resources')).toEqual([]);
  expect(ops.filter((o) => o.op === 'start').map((o) => o.node)).toEqual(['pve2']);
});
