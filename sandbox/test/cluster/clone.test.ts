import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { eventually, startTestCluster, type TestCluster } from '../../testkit';
import { clusterPaths } from '../../state/paths';
import { holdLock } from '../../state/files';

/**
 * `qm template` and `qm clone` as qemu-server runs them (API2/Qemu.pm template and
 * clone_vm, QemuServer.pm template_create and clone_disk), with pve-storage's storage
 * lock around every base volume and linked clone.
 */
let t: TestCluster;

beforeAll(async () => {
  t = await startTestCluster({ storageContent: { local: ['backup', 'images', 'iso', 'vztmpl'] }, lockTimeoutMs: 300 });
});
afterAll(async () => {
  await t.dispose();
});

const run = (argv: string[]) => execa(argv[0], argv.slice(1), { env: t.cluster.envFor('pve1'), reject: false });
const qm = (...args: string[]) => run(['qm', ...args]);
const CREATE = ['--name', 'golden', '--cores', '1', '--memory', '1024', '--ostype', 'l26', '--agent', '1', '--net0', 'virtio,bridge=vmbr0', '--scsihw', 'virtio-scsi-pci'];

/** A stopped VM with an imported boot disk and a cloud-init drive on `storage`. */
async function vmWithDisk(vmid: number, storage: string): Promise<void> {
  const image = path.join(t.tmp, `disk-${vmid}.qcow2`);
  await execa('qemu-img', ['create', '-f', 'qcow2', image, '2G']);
  expect((await qm('create', String(vmid), ...CREATE)).exitCode).toBe(0);
  expect((await qm('importdisk', String(vmid), image, storage, ...(storage === 'local' ? ['--format', 'qcow2'] : []))).exitCode).toBe(0);
  const volid = storage === 'local' ? `local:${vmid}/vm-${vmid}-disk-0.qcow2` : `${storage}:vm-${vmid}-disk-0`;
  expect((await qm('set', String(vmid), '--scsi0', volid, '--ide2', `${storage}:cloudinit`, '--boot', 'order=scsi0')).exitCode).toBe(0);
}

async function setModel(patch: Record<string, unknown>): Promise<() => void> {
  const file = clusterPaths(t.cluster.dir).clusterJson;
  const saved = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(saved), ...patch }));
  return () => fs.writeFileSync(file, saved);
}

test('qm template turns the disks into base volumes; the cloud-init drive stays; twice is refused', async () => {
  await vmWithDisk(300, 'local-lvm');
  const tpl = await qm('template', '300');
  expect(tpl.exitCode).toBe(0);
  expect(tpl.stdout).toContain('  Renamed "vm-300-disk-0" to "base-300-disk-0" in volume group "pve"');
  const conf = (await t.cluster.readConfig(300))!;
  expect(conf).toContain('\nscsi0: local-lvm:base-300-disk-0,size=2G\n');
  expect(conf).toContain('\nide2: local-lvm:vm-300-cloudinit,media=cdrom\n');
  expect(conf).toContain('\ntemplate: 1\n');
  const again = await qm('template', '300');
  expect([again.exitCode, again.stderr]).toEqual([255, "you can't convert a template to a template"]);
});

test('a conversion that fails after `template: 1` was written still exits 0, as qm has no exit handler for its task; `--disk` finishes it', async () => {
  await vmWithDisk(340, 'local-lvm');
  const restore = await setModel({ storageLockTimeoutMs: 300 });
  const held = holdLock(path.join(clusterPaths(t.cluster.dir).locksDir, 'pve-storage-local-lvm'));
  let failed;
  try {
    failed = await qm('template', '340');
  } finally {
    held.release();
    restore();
  }
  // RESTEnvironment's tee_worker prints the message of the task's `TASK ERROR:` line on stderr.
  expect([failed.exitCode, failed.stderr]).toEqual([0, "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"]);
  const conf = (await t.cluster.readConfig(340))!;
  expect(conf).toContain('\ntemplate: 1\n');
  expect(conf).toContain('\nscsi0: local-lvm:vm-340-disk-0,size=2G\n');
  // Now a template: only a disk named converts it (template_create with $disk).
  const again = await qm('template', '340');
  expect([again.exitCode, again.stderr]).toEqual([255, "you can't convert a template to a template"]);
  const disk = await qm('template', '340', '--disk', 'scsi0');
  expect([disk.exitCode, disk.stderr]).toEqual([0, '']);
  expect(await t.cluster.readConfig(340)).toContain('\nscsi0: local-lvm:base-340-disk-0,size=2G\n');
  expect((await qm('destroy', '340')).exitCode).toBe(0);
});

test("a fault at create_base fails qm template's task there: exit 0, the fault's text on stderr, `template: 1` with the disk unconverted", async () => {
  await vmWithDisk(341, 'local-lvm');
  const text = "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout";
  await t.cluster.injectFault({ command: 'qm template 341', at: 'create_base', stderr: text, times: 1 });
  const failed = await qm('template', '341');
  expect([failed.exitCode, failed.stderr]).toEqual([0, text]);
  const conf = (await t.cluster.readConfig(341))!;
  expect(conf).toContain('\ntemplate: 1\n');
  expect(conf).toContain('\nscsi0: local-lvm:vm-341-disk-0,size=2G\n');
  // The fault is spent: the next conversion of the disk goes through.
  expect((await qm('template', '341', '--disk', 'scsi0')).exitCode).toBe(0);
  expect(await t.cluster.readConfig(341)).toContain('\nscsi0: local-lvm:base-341-disk-0,size=2G\n');
  expect((await qm('destroy', '341')).exitCode).toBe(0);
});

test("/cluster/resources reports a new template's `template: 1` a status cycle late; its config says so at once", async () => {
  await vmWithDisk(342, 'local-lvm');
  const resource = async () => {
    const out = await run(['pvesh', 'get', '/cluster/resources', '--type', 'vm', '--output-format', 'json']);
    return (JSON.parse(out.stdout) as Array<{ vmid: number; name?: string; template?: number }>).find((v) => v.vmid === 342);
  };
  // A VM pvestatd has long reported: made two hours ago.
  const past = new Date(Date.now() - 2 * 3_600_000);
  fs.utimesSync(clusterPaths(t.cluster.dir).vmlistEntry(342), past, past);
  const restore = await setModel({ statusLagMs: 3_600_000 });
  try {
    expect(await resource()).toMatchObject({ vmid: 342, name: 'golden', template: 0 });
    expect((await qm('template', '342')).exitCode).toBe(0);
    // pve-manager PVE/API2Tools.pm extract_vm_stats: `template` is pvestatd's, from its last cycle.
    expect(await resource()).toMatchObject({ vmid: 342, template: 0 });
    expect((await qm('config', '342')).stdout).toMatch(/^template: 1$/m);
  } finally {
    restore();
  }
  expect(await resource()).toMatchObject({ vmid: 342, template: 1 });
  expect((await qm('destroy', '342')).exitCode).toBe(0);
});

test('a clone of a template is linked: new disk names, new cloud-init drive, new MAC and UUID, no template flag', async () => {
  const source = (await t.cluster.readConfig(300))!;
  const clone = await qm('clone', '300', '301', '--name', 'web-1');
  expect(clone.exitCode).toBe(0);
  expect(clone.stdout.split('\n')).toEqual(expect.arrayContaining(['create linked clone of drive scsi0 (local-lvm:base-300-disk-0)', '  Logical volume "vm-301-disk-0" created.', 'create full clone of drive ide2 (local-lvm:vm-300-cloudinit)']));
  const conf = (await t.cluster.readConfig(301))!;
  expect(conf).toContain('\nscsi0: local-lvm:vm-301-disk-0,size=2G\n');
  expect(conf).toContain('\nide2: local-lvm:vm-301-cloudinit,media=cdrom\n');
  expect(conf).toContain('\nname: web-1\n');
  expect(conf).not.toContain('template:');
  expect(conf).not.toContain('lock:');
  const mac = (c: string) => /\nnet0: virtio=([0-9A-F:]+),/.exec(c)?.[1];
  const uuid = (c: string) => /\nsmbios1: uuid=([0-9a-f-]+)/.exec(c)?.[1];
  expect(mac(conf)).toMatch(/^BC:24:11:/);
  expect(mac(conf)).not.toBe(mac(source));
  expect(uuid(conf)).not.toBe(uuid(source));
  // Without --name: qemu-server's default.
  expect((await qm('clone', '300', '302')).exitCode).toBe(0);
  expect(await t.cluster.readConfig(302)).toContain('\nname: Copy-of-VM-golden\n');
  // LVM-thin snapshots do not depend on their origin: the template may go first.
  for (const id of ['300', '301', '302']) expect((await qm('destroy', id)).exitCode).toBe(0);
});

test('clone refuses what clone_vm refuses, before it makes anything', async () => {
  await vmWithDisk(303, 'local-lvm');
  const linked = await qm('clone', '303', '304', '--full', '0');
  expect([linked.exitCode, linked.stderr]).toEqual([255, "Linked clone feature is not supported for 'local-lvm:vm-303-disk-0' (scsi0)"]);
  expect((await qm('template', '303')).exitCode).toBe(0);
  const storage = await qm('clone', '303', '304', '--storage', 'local-lvm');
  expect([storage.exitCode, storage.stderr]).toEqual([255, "parameter 'storage' not allowed for linked clones"]);
  const exists = await qm('clone', '303', '303', '--full', '1');
  expect([exists.exitCode, exists.stderr]).toEqual([255, 'unable to create VM 303: config file already exists']);
  expect(await t.cluster.readConfig(304)).toBeUndefined();
  // A full clone of a template is allowed, on any storage with images.
  const full = await qm('clone', '303', '304', '--full', '1', '--storage', 'local', '--format', 'qcow2');
  expect(full.exitCode).toBe(0);
  expect(await t.cluster.readConfig(304)).toContain('\nscsi0: local:304/vm-304-disk-0.qcow2,size=2G\n');
  for (const id of ['304', '303']) expect((await qm('destroy', id)).exitCode).toBe(0);
});

test('on a dir storage a linked clone is a qcow2 under its base, and the template stays while it has clones', async () => {
  await vmWithDisk(310, 'local');
  expect((await qm('template', '310')).exitCode).toBe(0);
  expect(await t.cluster.readConfig(310)).toContain('\nscsi0: local:310/base-310-disk-0.qcow2,size=2G\n');
  expect((await qm('clone', '310', '311')).exitCode).toBe(0);
  expect(await t.cluster.readConfig(311)).toContain('\nscsi0: local:310/base-310-disk-0.qcow2/311/vm-311-disk-0.qcow2,size=2G\n');
  const destroy = await qm('destroy', '310');
  expect([destroy.exitCode, destroy.stderr]).toEqual([255, "base volume 'local:310/base-310-disk-0.qcow2' is still in use by linked cloned"]);
  expect((await qm('destroy', '311')).exitCode).toBe(0);
  expect((await qm('destroy', '310')).exitCode).toBe(0);
});

test("a storage lock held elsewhere: the clone fails with pve-storage's timeout and leaves nothing behind", async () => {
  await vmWithDisk(320, 'local-lvm');
  expect((await qm('template', '320')).exitCode).toBe(0);
  const restore = await setModel({ storageLockTimeoutMs: 300 });
  const held = holdLock(path.join(clusterPaths(t.cluster.dir).locksDir, 'pve-storage-local-lvm'));
  try {
    const clone = await qm('clone', '320', '321');
    expect([clone.exitCode, clone.stderr]).toEqual([255, "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"]);
    expect(await t.cluster.readConfig(321)).toBeUndefined();
    expect((await run(['pvesm', 'list', 'local-lvm', '--vmid', '321'])).stdout.trim().split('\n')).toHaveLength(1); // the header only
  } finally {
    held.release();
    restore();
  }
  expect((await qm('clone', '320', '321')).exitCode).toBe(0);
});

test('parallel clones of one template queue on the storage lock; past its wait they fail', async () => {
  // Each clone holds the lock 400 ms; a caller waits 1 s: of six at once, the last ones time out.
  const restore = await setModel({ storageLockTimeoutMs: 1000, storageOpMs: 400 });
  try {
    const results = await Promise.all([330, 331, 332, 333, 334, 335].map((id) => qm('clone', '320', String(id))));
    const failed = results.filter((r) => r.exitCode !== 0);
    expect(failed.length).toBeGreaterThan(0);
    expect(results.length - failed.length).toBeGreaterThan(0);
    for (const r of failed) expect(r.stderr).toBe("clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout");
  } finally {
    restore();
  }
});

test('a clone holds a stopped source shared: clones of it go on together, a change to it waits and times out', async () => {
  // clone_vm takes lock_config_shared on a stopped source (lock_config_full on a running
  // one), so qm set, destroy or migrate of the template wait for the clones (here 300 ms).
  await vmWithDisk(350, 'local-lvm');
  expect((await qm('template', '350')).exitCode).toBe(0);
  const restore = await setModel({ storageOpMs: 1500, storageLockTimeoutMs: 5000 });
  try {
    const clones = [qm('clone', '350', '351'), qm('clone', '350', '352')];
    // Both hold the source: each has written its new config (under both locks).
    await eventually(async () => {
      if (!(await t.cluster.readConfig(351)) || !(await t.cluster.readConfig(352))) throw new Error('clones not under way');
    }, 10_000, 20);
    const lockText = "can't lock file '/var/lock/qemu-server/lock-350.conf' - got timeout";
    const set = await qm('set', '350', '--description', 'changed');
    expect([set.exitCode, set.stderr]).toEqual([255, lockText]);
    const destroy = await qm('destroy', '350');
    expect([destroy.exitCode, destroy.stderr]).toEqual([255, lockText]);
    expect((await Promise.all(clones)).map((r) => [r.exitCode, r.stderr])).toEqual([[0, ''], [0, '']]);
  } finally {
    restore();
  }
  expect((await qm('set', '350', '--description', 'changed')).exitCode).toBe(0);
});

test("a new id another node holds passes clone_vm's local check, then pmxcfs refuses the config's rename; nothing is left behind", async () => {
  await vmWithDisk(360, 'local-lvm');
  expect((await qm('template', '360')).exitCode).toBe(0);
  const onPve2 = (...args: string[]) => execa('qm', args, { env: t.cluster.envFor('pve2'), reject: false });
  expect((await onPve2('create', '361', '--name', 'elsewhere')).exitCode).toBe(0);
  const before = await t.cluster.readConfig(361);
  // qemu-server API2/Qemu.pm clone_vm checks `-f $conffile` on its own node only; its
  // file_set_contents then renames the temporary file, which pmxcfs (memdb.c memdb_rename)
  // refuses with EEXIST for a VMID another node holds.
  const clone = await qm('clone', '360', '361', '--name', 'clash');
  expect([clone.exitCode, clone.stderr]).toEqual([255, "close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/361.conf' failed: File exists"]);
  expect(clone.stdout).not.toMatch(/create (?:linked|full) clone/);
  expect(await t.cluster.readConfig(361)).toBe(before);
  expect(fs.existsSync(clusterPaths(t.cluster.dir).conf('pve1', 361))).toBe(false);
  expect((await run(['pvesm', 'list', 'local-lvm', '--vmid', '361'])).stdout.trim().split('\n')).toHaveLength(1); // the header only
  expect((await onPve2('destroy', '361')).exitCode).toBe(0);
  expect((await qm('clone', '360', '361')).exitCode).toBe(0);
  for (const id of ['361', '360']) expect((await qm('destroy', id)).exitCode).toBe(0);
});
