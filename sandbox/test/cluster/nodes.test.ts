import { execa } from 'execa';
import { startTestCluster, makeKeyPair, type TestCluster } from '../../testkit';

/**
 * Every sandbox node has a real OpenSSH server: the CLIs run there as on a Proxmox node
 * reached as root over SSH, acting on that node.
 */
let t: TestCluster;

beforeAll(async () => {
  t = await startTestCluster();
});
afterAll(async () => {
  await t?.dispose();
});

function sshTo(node: string, command: string, key = t.rootKey.file) {
  const { host, port } = t.cluster.nodeAddresses[node];
  return execa(
    'ssh',
    ['-i', key, '-p', String(port), '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', `root@${host}`, command],
    { reject: false },
  );
}

test('every node has an address; qm on pve2 through its sshd acts on pve2', async () => {
  expect(Object.keys(t.cluster.nodeAddresses).sort()).toEqual(['pve1', 'pve2']);
  expect(t.cluster.nodeAddresses.pve2.host).toBe('127.0.0.1');

  const create = await sshTo('pve2', 'qm create 100 --name on-pve2 --memory 512 --net0 virtio,bridge=vmbr0');
  expect([create.exitCode, create.stderr]).toEqual([0, '']);
  const status = await sshTo('pve2', 'qm status 100');
  expect([status.exitCode, status.stdout]).toEqual([0, 'status: stopped']);

  // qm only sees its own node, exactly like on Proxmox.
  const fromPve1 = await execa('qm', ['status', '100'], { env: t.cluster.envFor('pve1'), reject: false });
  expect(fromPve1.stderr).toBe("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist");
  expect(fromPve1.exitCode).not.toBe(0);

  const calls = await t.cluster.calls();
  expect(calls.filter((c) => c.argv[0] === 'qm' && c.argv[2] === '100').map((c) => [c.node, c.argv[1], c.exitCode])).toEqual([
    ['pve2', 'create', 0],
    ['pve2', 'status', 0],
    ['pve1', 'status', 255],
  ]);
});

test('errors travel back over SSH with their exit codes; pvesh and pvesm work there too', async () => {
  const again = await sshTo('pve2', 'qm create 100');
  expect([again.exitCode, again.stderr]).toEqual([255, "unable to create VM 100 - VM 100 already exists on node 'pve2'"]);
  const status = await sshTo('pve2', 'pvesh get /nodes/pve2/status --output-format json');
  expect(JSON.parse(status.stdout).cpuinfo.model).toMatch(/Xeon/);
  const storage = await sshTo('pve1', 'pvesm status --storage local-lvm');
  expect(storage.stdout.split('\n')[1]).toMatch(/^local-lvm +lvmthin +active /);
  // As installed, `local` takes no disks (qemu-server CLI/qm.pm importdisk, API2/Qemu.pm $check_storage_access).
  expect((await sshTo('pve1', 'pvesm status --content images')).stdout).not.toMatch(/^local /m);
  const onLocal = await sshTo('pve2', 'qm set 100 --scsi1 local:1');
  expect([onLocal.exitCode, onLocal.stderr]).toEqual([255, "400 Parameter verification failed.\nstorage: storage 'local' does not support vm images\nqm set <vmid> [OPTIONS]"]);
  const imported = await sshTo('pve2', 'qm importdisk 100 /etc/hostname local');
  expect([imported.exitCode, imported.stderr]).toEqual([255, 'storage local does not support vm images']);
});

test('injected faults reach commands run through sshd, filtered by node', async () => {
  await t.cluster.injectFault({ command: 'qm status', node: 'pve2', times: 1, stderr: "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout", exitCode: 4 });
  const onPve1 = await sshTo('pve1', 'qm status 100');
  expect(onPve1.stderr).toBe("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist");
  const failed = await sshTo('pve2', 'qm status 100');
  expect([failed.exitCode, failed.stderr]).toEqual([4, "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"]);
  expect((await sshTo('pve2', 'qm status 100')).stdout).toBe('status: stopped');
});

test('the node sshds accept only the root key', async () => {
  const stranger = makeKeyPair(t.tmp, 'stranger');
  const r = await sshTo('pve2', 'qm list', stranger.file);
  expect(r.exitCode).toBe(255);
  expect(r.stderr).toMatch(/Permission denied \(publickey\)/);
});
