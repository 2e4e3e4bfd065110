import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { startTestCluster, makeKeyPair, sshExec, eventually, type TestCluster, type KeyPair } from '../../sandbox/testkit';
import { clusterPaths } from '../../sandbox/state/paths';
import { initScriptEnv, initScriptFor, INIT_SCRIPT_VERSION, type InitScriptSettings } from '../../lib/initScripts';
import type { InitScriptPhase } from '../../contract';
import { connectGuest } from '../../lib/guestSsh';

/**
 * The init script's phases on process guests, across `qm template` and `qm clone`: a
 * template run and a seal on one VM, its clone booting as a new machine (cloud-init runs
 * again for the clone's new instance-id: new host key, new machine-id), and the clone run
 * skipping the package work the template did.
 */
let t: TestCluster;
let userKey: KeyPair;
let image: string;

beforeAll(async () => {
  t = await startTestCluster({ bootDelayMs: 300 });
  userKey = makeKeyPair(t.tmp, 'user_key');
  image = path.join(t.tmp, 'debian-12-generic-amd64.qcow2');
  await execa('qemu-img', ['create', '-f', 'qcow2', image, '2G']);
});
afterAll(async () => {
  await t?.dispose();
});

const qm = async (...args: string[]) => {
  const r = await execa('qm', args, { env: t.cluster.envFor('pve1'), reject: false });
  if (r.exitCode !== 0) throw new Error(`qm ${args.join(' ')}: ${r.stderr}`);
  return r;
};
const ssh = (vmid: number, command: string, stdin?: string) =>
  sshExec({ host: `127.0.0.${vmid}`, port: t.vmSshPort, username: 'alice', privateKey: userKey.privateKey, command, stdin, timeoutMs: 60_000 });
const guestFile = (vmid: number, rel: string) => path.join(clusterPaths(t.cluster.dir).guestRoot(vmid), rel);
const read = (vmid: number, rel: string) => fs.readFileSync(guestFile(vmid, rel), 'utf8');

const SETTINGS: InitScriptSettings = { timezone: 'UTC', locale: 'en_US.UTF-8', packages: ['nginx'], swapSize: '512M' };

/** As runInitScript sends it: the settings' exports, then the script, on `sudo bash -s`. */
function runPhase(vmid: number, phase: InitScriptPhase | undefined, settings = SETTINGS) {
  const env = initScriptEnv(settings, phase === 'clone' || phase === undefined ? { hash: '$5$salt$abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG' } : undefined, phase);
  const exports = Object.entries(env).map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'`).join('\n');
  return ssh(vmid, 'sudo bash -s', `${exports}\n${initScriptFor('debian', '12')}`);
}

test('template, seal, qm template, qm clone: the clone boots a new machine and its clone run skips the upgrade', async () => {
  const log = (vmid: number) => fs.readFileSync(clusterPaths(t.cluster.dir).guestLog(vmid), 'utf8');
  await qm('create', '131', '--name', 'golden', '--memory', '1024', '--ostype', 'l26', '--net0', 'virtio,bridge=vmbr0', '--scsihw', 'virtio-scsi-pci');
  await qm('importdisk', '131', image, 'local-lvm');
  await qm('set', '131', '--sshkeys', `${userKey.file}.pub`, '--ciuser', 'alice', '--ciupgrade', '0', '--tags', 'debian',
    '--scsi0', 'local-lvm:vm-131-disk-0', '--ide2', 'local-lvm:cloudinit', '--boot', 'order=scsi0', '--ipconfig0', 'ip=127.0.0.131/24,gw=127.0.0.1');
  await qm('start', '131');
  await eventually(() => ssh(131, 'true'));
  const templateKey = read(131, 'etc/ssh/ssh_host_ed25519_key.pub');
  const templateMachineId = read(131, 'etc/machine-id');
  expect(templateMachineId).toMatch(/^[0-9a-f]{32}\n$/);

  const template = await runPhase(131, 'template');
  expect({ code: template.code, stderr: template.stderr }).toEqual({ code: 0, stderr: '' });
  expect(template.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
  expect(log(131)).toMatch(/ root: apt-get .* dist-upgrade\n/);

  const seal = await runPhase(131, 'seal');
  expect({ code: seal.code, stderr: seal.stderr }).toEqual({ code: 0, stderr: '' });
  expect(seal.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
  expect(read(131, 'etc/machine-id')).toBe('');
  expect(fs.existsSync(guestFile(131, 'etc/ssh/ssh_host_ed25519_key.pub'))).toBe(false);
  expect(fs.existsSync(guestFile(131, 'var/lib/cloud/data/instance-id'))).toBe(false);
  expect(read(131, 'var/lib/qemurun/init-done')).toBe(`${INIT_SCRIPT_VERSION}\n`);
  // sshd reads its host keys for each connection: the sealing session finished, a new one ends.
  await expect(connectGuest({ host: '127.0.0.131', port: t.vmSshPort, username: 'alice', privateKey: Buffer.from(userKey.privateKey) }, 5000)).rejects.toThrow();

  await qm('shutdown', '131');
  await qm('template', '131');
  await qm('clone', '131', '132', '--name', 'web-1');
  await qm('set', '132', '--ipconfig0', 'ip=127.0.0.132/24,gw=127.0.0.1');
  await qm('start', '132');
  await eventually(() => ssh(132, 'true'));

  // A new instance-id, so cloud-init ran again: new host key; systemd: new machine-id.
  const cloneKey = read(132, 'etc/ssh/ssh_host_ed25519_key.pub');
  expect(cloneKey).not.toBe(templateKey);
  expect(read(132, 'etc/machine-id')).toMatch(/^[0-9a-f]{32}\n$/);
  expect(read(132, 'etc/machine-id')).not.toBe(templateMachineId);
  expect(read(132, 'var/lib/cloud/data/instance-id')).toMatch(/^[0-9a-f]{40}\n$/);
  expect((await ssh(132, 'hostname')).stdout).toBe('web-1\n');

  const before = log(132).length;
  const clone = await runPhase(132, 'clone', { ...SETTINGS, packages: ['nginx', 'redis-server'] });
  expect({ code: clone.code, stderr: clone.stderr }).toEqual({ code: 0, stderr: '' });
  expect(clone.stdout).toContain('skipping package sources, the upgrade and the base packages');
  expect(clone.stdout).toContain('[*] installing packages the template lacks: redis-server\n');
  expect(clone.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
  const cloneRun = log(132).slice(before);
  expect(cloneRun).not.toMatch(/dist-upgrade/);
  expect(cloneRun).toMatch(/ root: apt-get .* update\n/);
  expect(cloneRun).toMatch(/ root: apt-get .* install redis-server\n/);
  expect(cloneRun).toMatch(/ root: chpasswd -e\n/);

  // A reboot of the clone is not a new instance: the host key stays.
  await qm('shutdown', '132');
  await qm('start', '132');
  await eventually(() => ssh(132, 'true'));
  expect(read(132, 'etc/ssh/ssh_host_ed25519_key.pub')).toBe(cloneKey);
});

test('a clone run on a VM that no template made runs the full script, saying why', async () => {
  await qm('create', '133', '--name', 'plain', '--memory', '1024', '--ostype', 'l26', '--net0', 'virtio,bridge=vmbr0', '--scsihw', 'virtio-scsi-pci');
  await qm('importdisk', '133', image, 'local-lvm');
  await qm('set', '133', '--sshkeys', `${userKey.file}.pub`, '--ciuser', 'alice', '--ciupgrade', '0', '--tags', 'debian',
    '--scsi0', 'local-lvm:vm-133-disk-0', '--ide2', 'local-lvm:cloudinit', '--boot', 'order=scsi0', '--ipconfig0', 'ip=127.0.0.133/24,gw=127.0.0.1');
  await qm('start', '133');
  await eventually(() => ssh(133, 'true'));
  const r = await runPhase(133, 'clone');
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  expect(r.stdout).toContain('[*] running the full script instead of the clone phase: no template marker (/var/lib/qemurun/init-done)\n');
  expect(r.stdout).toContain('[*] upgrading packages\n');
});
