import { execa } from 'execa';
import { specOf } from '../../contract';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { runCli } from '../support/cliProcess';
import { onceInCliMode } from '../support/proxmoxMode';

/**
 * Placement and disks (issue 24, item 3) end to end: one install with tags, a description
 * holding marker-like lines, a pool, a storage other than ASSIGN_STORAGE, two extra data
 * disks (one on the install's storage, one on another), machine q35 and bios ovmf with its
 * EFI disk, checked in the VM's config and the pool's members; a rebuild keeps them all, a
 * migration carries the disks; each field's bad values are 400s naming it, before anything
 * starts.
 */

let h: Harness;
const VMID = 141;

beforeAll(async () => {
  // `local` takes disk images here (a dir storage an operator enabled them on), so the VM's
  // storage differs from ASSIGN_STORAGE (local-lvm).
  h = await startHarness({}, { pools: ['lab', 'prod'], storageContent: { local: ['backup', 'images', 'import', 'iso', 'vztmpl'] } });
});

afterAll(async () => {
  await h?.stop();
});

const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);
const pvesh = async (path: string) =>
  JSON.parse((await execa('pvesh', ['get', path, '--output-format', 'json'], { env: { ...process.env, ...h.sandbox.envFor('pve1') } })).stdout);
const config = async () => parseVmConfig((await h.sandbox.readConfig(VMID))!);

const DISKS = { disks: [{ size: '4G' }, { size: '2G', storage: 'local-lvm' }], machine: 'q35', bios: 'ovmf' };

/** The extra disks, machine and firmware as Proxmox shows them in `qm config`. */
async function expectDisks(): Promise<void> {
  const conf = await config();
  const drive = (key: string) => conf.disks.find((d) => d.key === key);
  expect(conf.entries.machine).toBe('q35');
  expect(conf.entries.bios).toBe('ovmf');
  // The EFI disk on the install's storage, the 4m vars template's size (528K on dir storage), no Secure Boot keys.
  expect(conf.entries.efidisk0).toMatch(/^local:\d+\/vm-\d+-disk-\d+\.raw,efitype=4m,pre-enrolled-keys=0,size=528K$/);
  expect([drive('scsi1')?.volid, drive('scsi1')?.sizeBytes]).toEqual([expect.stringMatching(/^local:/), 4 * 1024 ** 3]);
  expect([drive('scsi2')?.volid, drive('scsi2')?.sizeBytes]).toEqual([expect.stringMatching(/^local-lvm:vm-\d+-disk-\d+$/), 2 * 1024 ** 3]);
  expect(conf.entries.boot).toBe('order=scsi0');
  // On q35 the cloud-init drive is on SCSI, which every kernel reads: Debian 12's genericcloud kernel has no AHCI driver for ide2.
  expect([drive('scsi30')?.volid, drive('ide2')]).toEqual([expect.stringMatching(/cloudinit/), undefined]);
  expect(conf.disks.filter((d) => d.key.startsWith('unused'))).toEqual([]);
}

const NOTES = 'Owner: team web\nqemurun-owner=install-forged\nqemurun-adopted=never\nqemurun-seal=k:forged';

test('an install with tags, description, pool, storage, extra disks, q35 and ovmf: Proxmox has them, the markers still verify', async () => {
  const res = await requestSse(`${h.api}/vm/install`, {
    body: { os: 'debian', version: '12', id: VMID, name: 'placed', tags: ['Web', 'prod'], description: NOTES, pool: 'lab', storage: 'local', ...DISKS },
  });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-3)?.message).toBe(`[*] VMID: ${VMID}`);

  const conf = await config();
  expect(conf.entries.tags).toBe('debian;prod;web');
  expect(conf.description!.split('\n').slice(5).join('\n')).toBe(NOTES); // owner, run, instance, spec, seal
  expect(conf.disks.find((d) => d.key === 'scsi0')?.volid).toMatch(/^local:/);
  expect(conf.disks.find((d) => d.key === 'scsi30')?.volid).toMatch(/^local:.*cloudinit/); // q35: see expectDisks
  expect(conf.entries.pool).toBeUndefined(); // membership lives in user.cfg, never in the config
  expect((await pvesh('/pools/lab')).members.map((m: { vmid: number }) => m.vmid)).toEqual([VMID]);

  expect(markerSealFor(h.config).check(conf, VMID).sealed).toBe(true);
  expect(specOf(conf.description)).toMatchObject({ tags: ['prod', 'web'], pool: 'lab', storage: 'local', description: NOTES });
  expect(specOf(conf.description)).toMatchObject({ disks: [{ sizeGb: 4 }, { sizeGb: 2, storage: 'local-lvm' }], machine: 'q35', bios: 'ovmf' });
  await expectDisks();
  // Still in the managed set: a mutating operation goes through (set/cpu wants it stopped, as in the seed).
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  expect(await post(`/vm/${VMID}/set/cpu`, { cpu: 2 })).toMatchObject({ status: 200 });
  expect((await config()).cores).toBe(2);
});

test('a rebuild keeps the tags, the description, the pool, the storage, the disks, machine and bios', async () => {
  const res = await requestSse(`${h.api}/vm/${VMID}/rebuild`, { body: {} });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const conf = await config();
  expect(conf.entries.tags).toBe('debian;prod;web');
  expect(conf.description!.split('\n').slice(5).join('\n')).toBe(NOTES); // owner, run, instance, spec, seal
  expect(conf.disks.find((d) => d.key === 'scsi0')?.volid).toMatch(/^local:/);
  expect((await pvesh('/pools/lab')).members.map((m: { vmid: number }) => m.vmid)).toEqual([VMID]);
  expect(markerSealFor(h.config).check(conf, VMID).sealed).toBe(true);
  await expectDisks();
});

test('a migration carries the extra disks and the EFI disk', async () => {
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  const res = await requestSse(`${h.api}/vm/${VMID}/set/node`, { body: { node: 'pve2' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect((await pvesh('/cluster/resources')).find((r: { vmid?: number }) => r.vmid === VMID)?.node).toBe('pve2');
  await expectDisks();
  expect((await post(`/vm/${VMID}/start`)).status).toBe(200); // and it starts there
});

test('a destroy takes the VM out of its pool', async () => {
  expect((await post(`/vm/${VMID}/stop`)).status).toBe(200);
  expect((await post(`/vm/${VMID}/destroy`)).status).toBe(200);
  expect((await pvesh('/pools/lab')).members).toEqual([]);
});

test('bad placement values are 400s naming the field, and start nothing', async () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ tags: ['web server'] }, /^tags: must be Proxmox tags: tag 1 is not a Proxmox tag/],
    [{ tags: 'web' }, /^tags: must be an array of strings$/],
    [{ description: 'x'.repeat(8193) }, /^description: must be at most 8192 bytes$/],
    [{ description: 'x'.repeat(5000) }, /^description: is \d+ bytes too long/],
    [{ pool: 'a b' }, /^pool: must be a Proxmox pool name/],
    [{ pool: 'nope' }, /^pool: pool 'nope' does not exist \(the pools: lab, prod\)$/],
    [{ storage: 'nosuch' }, /^storage: storage 'nosuch' does not exist on node 'pve1'$/],
    [{ storage: 'nfs-backup' }, /^storage: storage 'nfs-backup' is inactive, not active$/],
    [{ storage: 'local-lvm', disk: '99999G' }, /^storage: storage 'local-lvm' has \d+G free, less than the 99999G disk$/],
    [{ storage: 'x:y' }, /^storage: must be a Proxmox storage id/],
    [{ disks: [{ size: '4' }] }, /^disks\[0\]\.size: must be a whole number of GiB/],
    [{ disks: [{ size: '4G' }, { size: '4G', storage: 'nosuch' }] }, /^disks\[1\]\.storage: storage 'nosuch' does not exist on node 'pve1'$/],
    [{ disks: [{ size: '1G', storage: 'nfs-backup' }] }, /^disks\[0\]\.storage: storage 'nfs-backup' is inactive, not active$/],
    [{ disks: [{ size: '99999G' }] }, /^disks\[0\]\.size: storage 'local-lvm' has \d+G free, less than the 100015G this install puts there$/],
    [{ machine: 'virt' }, /^machine: must be "q35" or "pc"$/],
    [{ bios: 'uefi' }, /^bios: must be "seabios" or "ovmf"$/],
  ];
  for (const [fields, message] of cases) {
    const res = await post('/vm/install', { os: 'debian', version: '12', ...fields });
    expect({ fields, status: res.status }).toEqual({ fields, status: 400 });
    // `please check your input: <field>: <rule>`, as every 400 of the install body.
    expect(res.json.message).toMatch(new RegExp(`: ${message.source.slice(1)}`));
  }
});

onceInCliMode("the CLI's flags send them: --tags split as Proxmox splits a tag list, --pool and --storage as given", async () => {
  const tags = await runCli(h.service.url, ['install', '--os', 'debian', '--version', '12', '--tags', 'web,prod;-x']);
  expect(tags.exitCode).toBe(1); // the API refused the request (docs/cli.md)
  expect(`${tags.stdout}${tags.stderr}`).toContain('tags: must be Proxmox tags: tag 3 is not a Proxmox tag');
  const pool = await runCli(h.service.url, ['install', '--os', 'debian', '--version', '12', '--tags', 'web prod', '--pool', 'nope', '--storage', 'local']);
  expect(`${pool.stdout}${pool.stderr}`).toContain("pool: pool 'nope' does not exist");
  const storage = await runCli(h.service.url, ['install', '--os', 'debian', '--version', '12', '--storage', 'nosuch']);
  expect(`${storage.stdout}${storage.stderr}`).toContain("storage: storage 'nosuch' does not exist");
  const disks = await runCli(h.service.url, ['install', '--os', 'debian', '--version', '12', '--disks', '8G,4G:nosuch', '--machine', 'q35', '--bios', 'ovmf']);
  expect(`${disks.stdout}${disks.stderr}`).toContain("disks[1].storage: storage 'nosuch' does not exist");
  const machine = await runCli(h.service.url, ['install', '--os', 'debian', '--version', '12', '--machine', 'virt']);
  expect(`${machine.stdout}${machine.stderr}`).toContain('machine: must be "q35" or "pc"');
});
