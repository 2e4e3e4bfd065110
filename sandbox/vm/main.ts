import fs from 'node:fs';
import type { Server } from 'node:net';
import { utils } from 'ssh2';
import { clusterPaths } from '../state/paths';
import { loadModel } from '../state/model';
import { parseConf, type VmConf } from '../state/vmconf';
import { readIfExists } from '../state/files';
import { watchVmRecord } from '../state/runtime';
import { vmOwner } from '../state/vmlist';
import { getVolume } from '../state/volumes';
import { uriUnescape } from '../state/escape';
import { bootDisk } from '../state/boot';
import { defaultUsers, guestOs } from './guestOs';
import { prepareGuestRoot, type CloudInit } from './guestRoot';
import { startGuestSsh } from './sshServer';
import { generateEd25519 } from '../sshKeys';
import { makeCtx } from '../cli/context';
import { customCloudinitFiles } from '../cli/qm/cicustom';
import { applyRuncmd, applyWriteFiles, readSnippetUserData, type SnippetUserData } from './userData';
import { netMac, nocloudFiles } from '../state/cloudinit';
import { nodeResolv } from '../qemu/network';
import { bootMachineId, INSTANCE_ID_FILE, recordInstance } from './instance';
import { dhcpLease, wantsDhcp, type GuestNetwork } from '../state/dhcp';
import { forwardAddress } from '../qemu/network';

/**
 * The "QEMU" process of one running sandbox VM (`node tsrun.js vm/main.ts <dir> <vmid>`,
 * spawned detached by `qm start`). After the boot delay it "boots" the disk in the boot
 * order: if that disk was imported from an OS image, cloud-init runs (when a cloud-init
 * drive is attached) and sshd comes up on ipconfig0's address (else `<gateway prefix>.<vmid>`;
 * with `ip=dhcp`, on the DHCP stand-in's lease, ../state/dhcp.ts), port vmSshPort; then its
 * stand-in guest agent answers `network-get-interfaces` with that address. A VM
 * without a bootable disk runs but never answers, like one stuck in its BIOS.
 *
 * SIGTERM is the ACPI power button (clean shutdown), SIGKILL is `qm stop`. The process
 * also exits when its pid file no longer names it or the cluster directory is gone, so
 * a test that forgets to stop its cluster leaves nothing running for long.
 */
const [dir, vmidArg] = process.argv.slice(2);
const vmid = Number(vmidArg);
const paths = clusterPaths(dir);
const log = (msg: string): void => void process.stdout.write(`${new Date().toISOString()} vm ${vmid}: ${msg}\n`);

let server: Server | undefined;

function shutdown(reason: string): void {
  log(`powering off (${reason})`);
  const done = () => process.exit(0);
  if (server) server.close(done);
  setTimeout(done, 200).unref();
}

process.on('SIGTERM', () => shutdown('ACPI shutdown'));
process.on('SIGINT', () => shutdown('SIGINT'));

watchVmRecord(dir, vmid, shutdown);

function loadConf(): { conf: VmConf; node: string } | undefined {
  const node = vmOwner(dir, vmid);
  const raw = node ? readIfExists(paths.conf(node, vmid)) : undefined;
  return node && raw !== undefined ? { conf: parseConf(raw), node } : undefined;
}

/** The `cicustom` user snippet on the VM's node, as `qm start` read it (it refused the start without one). */
function snippetUserData(conf: VmConf, node: string): SnippetUserData | undefined {
  if (!conf.props.cicustom) return undefined;
  try {
    const user = customCloudinitFiles(makeCtx(dir, node, { out: log, err: log }), conf).user;
    return user === undefined ? undefined : readSnippetUserData(user);
  } catch (err) {
    log(`cicustom unreadable: ${(err as Error).message}`);
    return undefined;
  }
}

function cloudInit(conf: VmConf, users: string[], custom: SnippetUserData | undefined): CloudInit | undefined {
  const hasDrive = Object.values(conf.props).some((v) => /(^|[:/])vm-\d+-cloudinit(\.\w+)?(,|$)/.test(v));
  if (!hasDrive) return undefined;
  // A user snippet replaces what Proxmox would generate from ciuser, sshkeys and cipassword.
  if (custom) {
    return {
      hostname: custom.hostname ?? (conf.props.name ?? `VM${vmid}`).split('.')[0],
      users: custom.user ? [custom.user] : users,
      keys: custom.keys.map((k) => k.trim()).filter(Boolean),
      passwordHash: custom.passwordHash,
    };
  }
  const ciuser = conf.props.ciuser;
  return {
    hostname: (conf.props.name ?? `VM${vmid}`).split('.')[0],
    // cloud-init's `user: <ciuser>` renames the OS's default account: with a ciuser there
    // is that account only (cloud-init 22.4 on Debian 12, seen on a real guest).
    users: ciuser ? [ciuser] : users,
    keys: uriUnescape(conf.props.sshkeys ?? '')
      .split('\n')
      .map((k) => k.trim())
      .filter(Boolean),
    passwordHash: conf.props.cipassword,
  };
}

/**
 * The instance-id on the VM's cloud-init drive (`nocloud_gen_metadata`, or a `cicustom`
 * meta snippet's): a hash of the user-data and network-config, so a clone, with its new
 * name and MACs, has a new one. Undefined when the drive could not be made.
 */
function instanceId(conf: VmConf, node: string): string | undefined {
  try {
    const custom = conf.props.cicustom ? customCloudinitFiles(makeCtx(dir, node, { out: log, err: log }), conf) : {};
    const meta = nocloudFiles(conf, vmid, nodeResolv(), undefined, custom)['meta-data'];
    return /^instance-id:\s*(\S+)/m.exec(meta)?.[1];
  } catch (err) {
    log(`no instance-id: ${(err as Error).message}`);
    return undefined;
  }
}

const GUEST_HOST_KEY_PUB = '/etc/ssh/ssh_host_ed25519_key.pub';

function hostKey(): string {
  const file = paths.guestHostKey(vmid);
  const existing = readIfExists(file);
  // A key written by an older sandbox may be one of ssh2's unreadable ones (see sshKeys.ts).
  if (existing && !(utils.parseKey(existing) instanceof Error)) return existing;
  const pair = generateEd25519(`root@vm${vmid}`);
  fs.writeFileSync(file, pair.private, { mode: 0o600 });
  return pair.private;
}

/**
 * The public half where a real guest's sshd keeps it, so the guest agent can read it
 * (`agent/file-read`), as on a real first boot (ssh-keygen -A).
 */
function publishHostKey(root: string, privateKey: string): void {
  const parsed = utils.parseKey(privateKey);
  if (parsed instanceof Error || Array.isArray(parsed)) throw new Error('unreadable guest host key');
  fs.mkdirSync(`${root}/etc/ssh`, { recursive: true });
  fs.writeFileSync(`${root}${GUEST_HOST_KEY_PUB}`, `${parsed.type} ${parsed.getPublicSSH().toString('base64')} root@vm${vmid}\n`, { mode: 0o644 });
}

/** ipconfig0 `ip=dhcp`: the DHCP stand-in's lease for net0's MAC; otherwise the static address. */
function guestAddress(conf: VmConf, gateway: string): string | undefined {
  // The loopback address the guest's network config gives it; never a non-loopback one.
  if (!wantsDhcp(conf)) return forwardAddress(gateway, vmid, conf.props.ipconfig0);
  const mac = netMac(conf.props.net0 ?? '');
  return mac ? dhcpLease(dir, mac, gateway) : undefined;
}

async function boot(): Promise<void> {
  // The agent answers for this boot only, once it has come up.
  fs.rmSync(paths.guestNetwork(vmid), { force: true });
  const model = loadModel(dir);
  await new Promise((r) => setTimeout(r, model.bootDelayMs));
  const found = loadConf();
  if (!found) return log('no configuration: nothing to boot');
  const { conf, node } = found;
  const disk = bootDisk(conf);
  const volid = disk ? conf.props[disk].split(',')[0] : undefined;
  const volume = volid ? getVolume(dir, node, volid) : undefined;
  if (!volume?.source) return log(`No bootable device (boot: ${conf.props.boot ?? '-'}).`);

  const os = guestOs(conf, volume.source);
  const custom = snippetUserData(conf, node);
  const ci = cloudInit(conf, defaultUsers(os), custom);
  const root = paths.guestRoot(vmid);
  fs.mkdirSync(root, { recursive: true });
  const firstBoot = !fs.existsSync(`${root}/etc/os-release`);
  const fault = model.guestFaults?.[String(vmid)] ?? {};
  prepareGuestRoot(root, os, ci, { packageOutputLines: model.packageOutputLines, packageSilenceMs: model.packageSilenceMs, packageExitCode: fault.packageExitCode, cloudInitStatus: fault.cloudInitStatus });
  // systemd, before anything else: an empty (sealed) /etc/machine-id gets a new ID.
  if (bootMachineId(root)) log('first boot of this machine-id: wrote a new /etc/machine-id');
  // cloud-init's per-instance part runs when the drive's instance-id is not the one it
  // recorded: on the first boot, on a clone's, and after `cloud-init clean`.
  const iid = ci ? instanceId(conf, node) : undefined;
  const newInstance = ci !== undefined && (iid === undefined ? firstBoot : recordInstance(root, iid));
  if (ci && newInstance) {
    // cc_ssh (ssh_deletekeys, ssh_genkeytypes): the old host keys go, new ones are made.
    fs.rmSync(paths.guestHostKey(vmid), { force: true });
    log(`cloud-init: new instance ${iid ?? '(no id)'}: new SSH host keys (${INSTANCE_ID_FILE})`);
  }
  if (ci && newInstance && conf.props.ciupgrade !== '0') {
    // cloud-init's package_upgrade (PVE's ciupgrade, default on) runs at first boot.
    fs.appendFileSync(paths.guestLog(vmid), `${new Date().toISOString()} cloud-init: package_upgrade (${os.id === 'rocky' ? 'dnf -y upgrade' : 'apt-get -y dist-upgrade'})\n`);
  }
  if (ci && custom && newInstance) {
    // cloud-init's per-instance modules, before sshd here (QemuRun waits for cloud-init anyway).
    if (custom.packages.length) fs.appendFileSync(paths.guestLog(vmid), `${new Date().toISOString()} cloud-init: packages ${custom.packages.join(' ')} (not installed: process guests have no package manager)\n`);
    applyWriteFiles(root, custom.writeFiles, log);
    await applyRuncmd(root, ci.hostname, paths.guestLog(vmid), custom.runcmd, log);
  }
  log(`booted ${os.id ?? 'unknown OS'} ${os.version ?? ''} from ${volid}; cloud-init ${ci ? `users ${ci.users.join(',')}` : 'absent'}`);

  if (fault.noSsh) return log('sshd not started (guest fault noSsh): the guest never answers SSH');
  const address = guestAddress(conf, model.gateway);
  if (!address) return log(`no loopback address for VMID ${vmid} with gateway ${model.gateway} (or no MAC for DHCP): sshd not reachable`);
  const keyInRoot = fs.existsSync(`${root}${GUEST_HOST_KEY_PUB}`);
  if (!keyInRoot && !newInstance && !firstBoot && os.id !== 'rocky') {
    // Debian's and Ubuntu's ssh.service run `sshd -t` first; without host keys (a sealed
    // disk booted with no new instance-id to make cloud-init make them) sshd never starts.
    // Rocky's sshd-keygen@ units make missing keys at boot.
    return log('sshd: no hostkeys available -- exiting.');
  }
  if (!keyInRoot) fs.rmSync(paths.guestHostKey(vmid), { force: true });
  const key = hostKey();
  publishHostKey(root, key);
  server = await startGuestSsh({
    host: address,
    port: model.vmSshPort,
    hostKey: key,
    root,
    hostname: ci?.hostname ?? `vm${vmid}`,
    privilegedLog: paths.guestLog(vmid),
    log,
  });
  log(`sshd listening on ${address}:${model.vmSshPort}`);
  const network: GuestNetwork = { pid: process.pid, mac: netMac(conf.props.net0 ?? ''), address };
  fs.writeFileSync(paths.guestNetwork(vmid), JSON.stringify(network));
}

boot().catch((err) => {
  log(`boot failed: ${(err as Error).stack ?? err}`);
});
