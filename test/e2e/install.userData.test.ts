import fs from 'node:fs';
import { execa } from 'execa';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { runInGuest, userKeyPair } from '../support/guest';
import { apiModeOnly, onceInCliMode } from '../support/proxmoxMode';

/**
 * cloud-init user-data (issue 24, item 4) end to end: an install with `userData` gets it as
 * Proxmox takes custom user-data (a `cicustom user=` snippet on SNIPPETS_STORAGE, 0600),
 * merged with the account and keys QemuRun needs; the process guest applies its
 * write_files and runcmd; a migration carries the snippet to the target node (`local` is
 * not shared); a destroy removes it; bad user-data is a 400 naming `userData`. In the
 * api-mode pass (jest.config.js) the API refuses any userData: Proxmox's API uploads no snippets.
 */


let h: Harness;
const VMID = 187;
const SNIPPET = `local:snippets/qemurun-${VMID}-user.yaml`;
const extra = userKeyPair('extra@laptop');

beforeAll(async () => {
  // Proxmox's stock `local` takes no snippets: here an operator added them (pvesm set local --content ...,snippets).
  h = await startHarness({}, { storageContent: { local: ['backup', 'import', 'iso', 'snippets', 'vztmpl'] } });
});

afterAll(async () => {
  await h?.stop();
});

const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);
const config = async () => parseVmConfig((await h.sandbox.readConfig(VMID))!);
/** The snippet's file on `node`, as `pvesm path` names it there. */
const snippetFile = async (node: string) => (await execa('pvesm', ['path', SNIPPET], { env: { ...process.env, ...h.sandbox.envFor(node) } })).stdout.trim();
const inGuest = (command: string, key = h.key.privateKey) => runInGuest(`127.0.0.${VMID}`, h.config.vmSshPort, 'debian', key, command);

const USER_DATA = [
  '#cloud-config',
  'packages: [curl]',
  'ssh_authorized_keys:',
  `  - ${extra.publicKey.trim()}`,
  'write_files:',
  '  - path: /etc/qemurun-note',
  '    content: "written by cloud-init\\n"',
  "    permissions: '0640'",
  // As a kernel upgrade leaves it: the install must reboot to use it.
  '  - path: /boot/vmlinuz-99.0.0-1-amd64',
  '    content: "a kernel newer than the running one\\n"',
  'runcmd:',
  '  - echo ran > /var/tmp/runcmd-done',
  '  - [touch, /var/tmp/runcmd-argv]',
  '',
].join('\n');

onceInCliMode('an install with userData: the cicustom snippet, merged, and its write_files and runcmd took effect in the guest', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, name: 'ud', userData: USER_DATA } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  // userData never shows in the progress a client (and the history's events) see.
  expect(JSON.stringify(res.events)).not.toContain('runcmd-done');
  // The guest said it needs a reboot for its new kernel, and got one.
  const rebootEvents = res.events.filter((e) => e.step === 'VM initialization > reboot').map((e) => e.message);
  expect(rebootEvents[0]).toMatch(/^\[\*\] rebooting: kernel 99\.0\.0-1-amd64 is installed, \S+ is running$/);
  expect(rebootEvents).toContain('[*] rebooting VM');

  const conf = await config();
  expect(conf.entries.cicustom).toBe(`user=${SNIPPET}`);
  const file = await snippetFile('pve1');
  expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  const text = fs.readFileSync(file, 'utf8');
  expect(text.startsWith('#cloud-config\nhostname: ud-187\nmanage_etc_hosts: true\nfqdn: ud-187\nuser: debian\n')).toBe(true);
  expect(text).toContain('packages:\n  - curl\n');
  expect(text).toContain(extra.publicKey.trim());

  expect(await inGuest('test "$(cat /etc/qemurun-note)" = "written by cloud-init" && test "$(stat -c %a /etc/qemurun-note)" = 640')).toBe(0);
  expect(await inGuest('test "$(cat /var/tmp/runcmd-done)" = ran && test -f /var/tmp/runcmd-argv')).toBe(0);
  // The caller's key was merged with QemuRun's: both log in.
  expect(await inGuest('true', extra.privateKey)).toBe(0);
});

onceInCliMode('a migration copies the snippet to the target node first, and the VM starts there', async () => {
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  const res = await requestSse(`${h.api}/vm/${VMID}/set/node`, { body: { node: 'pve2' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const there = await snippetFile('pve2');
  expect(there).not.toBe(await snippetFile('pve1'));
  expect(fs.readFileSync(there, 'utf8')).toBe(fs.readFileSync(await snippetFile('pve1'), 'utf8'));
  expect((await post(`/vm/${VMID}/start`)).status).toBe(200);
});

onceInCliMode('a destroy removes the snippet from every node that held it', async () => {
  const files = [await snippetFile('pve1'), await snippetFile('pve2')];
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  expect((await post(`/vm/${VMID}/destroy`)).status).toBe(200);
  for (const f of files) expect(fs.existsSync(f)).toBe(false);
});

onceInCliMode('qemu-server refuses a start whose snippet is missing on the node, with its text', async () => {
  const env = { ...process.env, ...h.sandbox.envFor('pve1') };
  await execa('qm', ['create', '188', '--ide2', 'local-lvm:cloudinit', '--cicustom', 'user=local:snippets/absent.yaml'], { env });
  try {
    const start = await execa('qm', ['start', '188'], { env, reject: false });
    expect(start.exitCode).toBe(255);
    expect(start.stderr).toBe("can't find file 'local:snippets/absent.yaml'");
    await execa('qm', ['set', '188', '--cicustom', 'user=local:iso/absent.yaml'], { env });
    expect((await execa('qm', ['start', '188'], { env, reject: false })).stderr).toBe('local:iso/absent.yaml is not in the snippets directory');
  } finally {
    await execa('qm', ['destroy', '188', '--purge'], { env, reject: false });
  }
});

onceInCliMode('bad userData is a 400 naming userData, and starts nothing', async () => {
  const cases: Array<[unknown, RegExp]> = [
    [42, /^userData: must be a string holding a #cloud-config document$/],
    ['runcmd: [ls]', /^userData: must start with a "#cloud-config" line/],
    ['#cloud-config\n[1, 2]\n', /^userData: must be a YAML mapping/],
    ['#cloud-config\nruncmd: ls\n', /^userData\.runcmd: must be a list$/],
    ['#cloud-config\nusers: [{name: eve}]\n', /^userData\.users: is set by QemuRun/],
  ];
  for (const [userData, message] of cases) {
    const r = await post('/vm/install', { os: 'debian', version: '12', userData });
    expect([r.status, r.json.message]).toEqual([400, expect.stringMatching(new RegExp(`^please check your input: ${message.source.slice(1)}`))]);
  }
});

apiModeOnly('API mode refuses userData with a 400 naming it and saying why, and starts nothing', async () => {
  const r = await post('/vm/install', { os: 'debian', version: '12', id: VMID, userData: USER_DATA });
  expect(r.status).toBe(400);
  expect(r.json.message).toMatch(/^please check your input: userData: is not available in API mode: Proxmox's API cannot upload the cicustom snippet/);
  expect(await h.sandbox.readConfig(VMID)).toBeUndefined();
});
