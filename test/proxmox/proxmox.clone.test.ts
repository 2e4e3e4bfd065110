import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { LocalExecutor } from '../../lib/executor';
import { ApiNode, CliNode, type ProxmoxNode } from '../../lib/proxmox';
import { PveApi } from '../../lib/proxmox/api/http';
import { StorageError, StorageLockError, VmidTakenError, VmStateError } from '../../lib/proxmox/errors';
import { clusterPaths } from '../../sandbox/state/paths';
import { holdLock } from '../../sandbox/state/files';
import { startTestCluster, type TestCluster } from '../../sandbox/testkit';
import { testSpawner } from '../support/spawner';

/**
 * ProxmoxNode.cloneVm and convertToTemplate against the sandbox, through `qm` (CLI mode)
 * and through the REST API's clone and template tasks: the same calls, the same error
 * classes for the same Proxmox texts.
 */
let t: TestCluster;
let api: PveApi;

beforeAll(async () => {
  t = await startTestCluster({ api: { authFailureDelayMs: 0 }, storageContent: { local: ['backup', 'images', 'iso', 'vztmpl'] }, pools: ['lab'] });
  const a = t.cluster.api!;
  api = new PveApi({ urls: [a.url], token: `${a.token.tokenid}=${a.token.secret}`, fingerprint: a.fingerprint });
});
afterAll(async () => {
  api?.close();
  await t?.dispose();
});

const qm = (...args: string[]) => execa('qm', args, { env: t.cluster.envFor('pve1'), reject: false });

/** A stopped VM with an imported boot disk and a cloud-init drive on local-lvm. */
async function vmWithDisk(vmid: number): Promise<void> {
  const image = path.join(t.tmp, `disk-${vmid}.qcow2`);
  await execa('qemu-img', ['create', '-f', 'qcow2', image, '1G']);
  expect((await qm('create', String(vmid), '--name', `golden-${vmid}`, '--description', 'golden image', '--memory', '512', '--net0', 'virtio,bridge=vmbr0', '--scsihw', 'virtio-scsi-pci')).exitCode).toBe(0);
  expect((await qm('importdisk', String(vmid), image, 'local-lvm')).exitCode).toBe(0);
  expect((await qm('set', String(vmid), '--scsi0', `local-lvm:vm-${vmid}-disk-0`, '--ide2', 'local-lvm:cloudinit', '--boot', 'order=scsi0')).exitCode).toBe(0);
}

/** Changes the sandbox's cluster model until the returned function restores it. */
function setModel(patch: Record<string, unknown>): () => void {
  const file = clusterPaths(t.cluster.dir).clusterJson;
  const saved = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(saved), ...patch }));
  return () => fs.writeFileSync(file, saved);
}

const modes: Array<[string, number, () => ProxmoxNode]> = [
  ['cli', 400, () => new CliNode(new LocalExecutor('pve1', { spawner: testSpawner(), env: t.cluster.envFor('pve1') }))],
  ['api', 500, () => new ApiNode(api, 'pve1', { pollMs: 50 })],
];

describe.each(modes)('%s mode', (_mode, base, node) => {
  const tpl = base;

  test('convertToTemplate makes base volumes; a template again is a VmStateError', async () => {
    await vmWithDisk(tpl);
    await node().convertToTemplate(tpl);
    const conf = (await t.cluster.readConfig(tpl))!;
    expect(conf).toContain('\ntemplate: 1\n');
    expect(conf).toContain(`\nscsi0: local-lvm:base-${tpl}-disk-0,size=1G\n`);
    const again = await node().convertToTemplate(tpl).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(VmStateError);
    expect((again as VmStateError).stderr).toContain("you can't convert a template to a template");
  });

  test('cloneVm of a template is linked by default, with the name, description and pool given', async () => {
    await node().cloneVm(tpl, tpl + 1, { name: `web-${tpl + 1}`, description: 'owner: test\nspec: x', pool: 'lab' });
    const conf = (await t.cluster.readConfig(tpl + 1))!;
    expect(conf).toContain(`\nscsi0: local-lvm:vm-${tpl + 1}-disk-0,size=1G\n`);
    expect(conf).toContain(`\nname: web-${tpl + 1}\n`);
    expect(conf).not.toContain('template:');
    expect(conf).not.toContain('lock:');
    expect((await node().config(tpl + 1)).description).toBe('owner: test\nspec: x');
    const pool = await api.get<{ members: Array<{ vmid?: number }> }>('/pools/lab');
    expect(pool.members.map((m) => m.vmid)).toContain(tpl + 1);
  });

  test('cloneVm full copies onto the storage and format asked for; a linked clone with a storage is refused', async () => {
    await node().cloneVm(tpl, tpl + 2, { full: true, storage: 'local', format: 'qcow2' });
    expect(await t.cluster.readConfig(tpl + 2)).toContain(`\nscsi0: local:${tpl + 2}/vm-${tpl + 2}-disk-0.qcow2,size=1G\n`);
    await expect(node().cloneVm(tpl, tpl + 3, { full: false, storage: 'local' })).rejects.toMatchObject({ name: 'ParameterError' });
    // A VM (not a template) has no base volume to link to.
    const linked = await node().cloneVm(tpl + 2, tpl + 3, { full: false }).catch((e: unknown) => e);
    expect(linked).toBeInstanceOf(StorageError);
    expect(await t.cluster.readConfig(tpl + 3)).toBeUndefined();
  });

  test('a new id that exists is a VmidTakenError, and the VM there is left as it was', async () => {
    const before = await t.cluster.readConfig(tpl + 1);
    const err = await node().cloneVm(tpl, tpl + 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VmidTakenError);
    expect((err as VmidTakenError).retryable).toBe(false);
    expect((err as VmidTakenError).stderr).toContain(`unable to create VM ${tpl + 1}: config file already exists`);
    expect(await t.cluster.readConfig(tpl + 1)).toBe(before);
  });

  test('a new id another node holds is a VmidTakenError too: pmxcfs refuses the new config, and nothing is made', async () => {
    const elsewhere = tpl + 6;
    expect((await execa('qm', ['create', String(elsewhere), '--name', 'elsewhere'], { env: t.cluster.envFor('pve2'), reject: false })).exitCode).toBe(0);
    const before = await t.cluster.readConfig(elsewhere);
    const err = await node().cloneVm(tpl, elsewhere).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VmidTakenError);
    expect((err as VmidTakenError).retryable).toBe(false);
    expect((err as VmidTakenError).stderr).toContain(`close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/${elsewhere}.conf' failed: File exists`);
    expect(await t.cluster.readConfig(elsewhere)).toBe(before);
    expect(fs.existsSync(clusterPaths(t.cluster.dir).conf('pve1', elsewhere))).toBe(false);
  });

  test("the storage's lock held past its wait: a retryable StorageLockError naming the storage; the next try clones", async () => {
    const restore = setModel({ storageLockTimeoutMs: 300 });
    const held = holdLock(path.join(clusterPaths(t.cluster.dir).locksDir, 'pve-storage-local-lvm'));
    try {
      const err = await node().cloneVm(tpl, tpl + 4).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageLockError);
      expect(err).toMatchObject({ retryable: true, storage: 'local-lvm' });
      expect((err as StorageLockError).stderr).toContain("can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout");
      expect(await t.cluster.readConfig(tpl + 4)).toBeUndefined();
    } finally {
      held.release();
      restore();
    }
    await node().cloneVm(tpl, tpl + 4);
    expect(await t.cluster.readConfig(tpl + 4)).toContain(`\nscsi0: local-lvm:vm-${tpl + 4}-disk-0,size=1G\n`);
    // Without a description of its own, a clone has its template's (clone_vm copies it).
    expect((await node().config(tpl + 4)).description).toBe('golden image');
  });

  test("a conversion that fails after `template: 1` is the task's StorageLockError though qm exits 0; converting the disk left finishes it", async () => {
    const vmid = tpl + 5;
    await vmWithDisk(vmid);
    const text = "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout";
    await t.cluster.injectFault({ command: `qm template ${vmid}`, at: 'create_base', stderr: text, times: 1 });
    const err = await node().convertToTemplate(vmid).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockError);
    expect(err).toMatchObject({ retryable: true, storage: 'local-lvm' });
    expect((await node().config(vmid)).entries).toMatchObject({ template: '1', scsi0: `local-lvm:vm-${vmid}-disk-0,size=1G` });
    await node().convertToTemplate(vmid, { disk: 'scsi0' });
    expect((await node().config(vmid)).entries.scsi0).toBe(`local-lvm:base-${vmid}-disk-0,size=1G`);
  });
});
