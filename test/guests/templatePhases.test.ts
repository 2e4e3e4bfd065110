import fs from 'node:fs';
import { execa } from 'execa';
import { startTestCluster, makeKeyPair, sshExec, type TestCluster, type KeyPair } from '../../sandbox/testkit';
import { prepareRealGuests } from '../../sandbox/qemu/images';
import { GUEST_ARCHIVE_URL } from '../../sandbox/qemu/network';
import { connectGuest, peekHostKey } from '../../lib/guestSsh';
import { initScriptEnv, initScriptFor, type InitScriptSettings } from '../../lib/initScripts';
import type { InitScriptPhase } from '../../contract';

/**
 * The init script's phases on a real Debian 12 guest, across `qm template` and `qm
 * clone`: template and seal on one VM, then its clone boots with cloud-init running
 * again (new host key, machine-id, hostname) and the clone run skips the upgrade. Each
 * step's time is printed (and kept in $PHASES_TIMINGS when set).
 */
const MINUTES = 60_000;
let t: TestCluster;
let userKey: KeyPair;
let image: string;
const timings: Record<string, number> = {};

beforeAll(async () => {
  image = (await prepareRealGuests(['12'], console.log)).files[0].file;
  t = await startTestCluster({ guests: 'qemu', bootDelayMs: 0, lockTimeoutMs: 10_000 });
  userKey = makeKeyPair(t.tmp, 'user_key');
}, 30 * MINUTES);
afterAll(async () => {
  console.log(`phase timings (s): ${JSON.stringify(timings)}`);
  if (process.env.PHASES_TIMINGS) fs.writeFileSync(process.env.PHASES_TIMINGS, JSON.stringify(timings, null, 2));
  await t?.dispose();
});

async function timed<T>(step: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await fn();
  } finally {
    timings[step] = Math.round((Date.now() - started) / 100) / 10;
  }
}

const qm = async (...args: string[]) => {
  const r = await execa('qm', args, { env: t.cluster.envFor('pve1'), reject: false });
  if (r.exitCode !== 0) throw new Error(`qm ${args.join(' ')}: ${r.stderr}`);
  return r;
};
const host = (vmid: number) => `127.0.0.${vmid}`;
const ssh = (vmid: number, command: string, stdin?: string, timeoutMs = 20_000) =>
  sshExec({ host: host(vmid), port: t.vmSshPort, username: 'alice', privateKey: userKey.privateKey, command, stdin, timeoutMs });

async function sshUp(vmid: number): Promise<void> {
  const deadline = Date.now() + 15 * MINUTES;
  for (;;) {
    try {
      if ((await ssh(vmid, 'cloud-init status --wait >/dev/null; true', undefined, 10 * MINUTES)).code === 0) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

const SETTINGS: InitScriptSettings = { mirror: GUEST_ARCHIVE_URL, timezone: 'UTC', locale: 'en_US.UTF-8', packages: ['tree'], swapSize: '512M' };

/** `after`: commands run as root in the same session once the script is done. */
async function runPhase(vmid: number, phase: InitScriptPhase, settings = SETTINGS, after = '') {
  const env = initScriptEnv(settings, undefined, phase);
  const exports = Object.entries(env).map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'`).join('\n');
  const r = await ssh(vmid, 'sudo bash -s', `${exports}\n${initScriptFor('debian', '12')}${after}`, 30 * MINUTES);
  if (r.code !== 0) throw new Error(`${phase} exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('Debian 12: template, seal, qm template, qm clone; the clone is a new machine and skips the upgrade', async () => {
  await timed('create', async () => {
    await qm('create', '141', '--name', 'golden', '--memory', '1024', '--ostype', 'l26', '--agent', '1', '--net0', 'virtio,bridge=vmbr0', '--scsihw', 'virtio-scsi-pci');
    await qm('importdisk', '141', image, 'local-lvm');
    await qm('set', '141', '--sshkeys', `${userKey.file}.pub`, '--ciuser', 'alice', '--ciupgrade', '0', '--tags', 'debian',
      '--scsi0', 'local-lvm:vm-141-disk-0', '--ide2', 'local-lvm:cloudinit', '--boot', 'order=scsi0', '--ipconfig0', `ip=${host(141)}/24,gw=127.0.0.1`);
    await qm('resize', '141', 'scsi0', '+2G');
  });
  await timed('template VM boot to SSH', async () => {
    await qm('start', '141');
    await sshUp(141);
  });
  const templateKey = await peekHostKey({ host: host(141), port: t.vmSshPort });
  const templateId = (await ssh(141, 'cat /etc/machine-id')).stdout;

  const template = await timed('template phase', () => runPhase(141, 'template'));
  expect(template).toContain('[*] upgrading packages\n');
  expect(template).toMatch(/^\[\+\] init script finished in \d+s$/m);
  // Checked in the sealing session itself: sshd reads its host keys for each new
  // connection, so after the seal a new one is refused (the product shuts the VM down).
  const seal = await timed('seal phase', () => runPhase(141, 'seal', SETTINGS, "echo \"sealed: $(wc -c < /etc/machine-id) $(ls /etc/ssh | grep -c '^ssh_host_' || true)\"\n"));
  expect(seal).toMatch(/^\[\*\] cleaning cloud-init's state and logs \(cloud-init clean --logs --seed\)$/m);
  expect(seal).toMatch(/^\[\+\] init script finished in \d+s$/m);
  expect(seal).toMatch(/^sealed: 0 0$/m);
  await expect(connectGuest({ host: host(141), port: t.vmSshPort, username: 'alice', privateKey: Buffer.from(userKey.privateKey) }, 20_000)).rejects.toThrow();

  await timed('qm shutdown', () => qm('shutdown', '141'));
  await timed('qm template', () => qm('template', '141'));
  await timed('qm clone', () => qm('clone', '141', '142', '--name', 'web-1'));
  await qm('set', '142', '--ipconfig0', `ip=${host(142)}/24,gw=127.0.0.1`);
  await timed('clone boot to SSH', async () => {
    await qm('start', '142');
    await sshUp(142);
  });
  const cloneKey = await peekHostKey({ host: host(142), port: t.vmSshPort });
  expect(cloneKey).not.toBe(templateKey);
  const facts = (await ssh(142, 'cat /etc/machine-id; hostname; ls /etc/ssh/ssh_host_ed25519_key.pub')).stdout.split('\n');
  expect(facts[0]).toMatch(/^[0-9a-f]{32}$/);
  expect(`${facts[0]}\n`).not.toBe(templateId);
  expect(facts.slice(1, 3)).toEqual(['web-1', '/etc/ssh/ssh_host_ed25519_key.pub']);

  const clone = await timed('clone phase', () => runPhase(142, 'clone', { ...SETTINGS, packages: ['tree', 'sl'] }));
  expect(clone).toContain('skipping package sources, the upgrade and the base packages');
  expect(clone).not.toContain('upgrading packages');
  expect(clone).toContain('[*] installing packages the template lacks: sl\n');
  expect(clone).toMatch(/^\[\+\] init script finished in \d+s$/m);
  expect((await ssh(142, "dpkg-query --show --showformat='${db:Status-Status}\\n' tree sl; awk 'NR > 1 { print $1 }' /proc/swaps")).stdout).toBe('installed\ninstalled\n/swapfile\n');
}, 90 * MINUTES);
