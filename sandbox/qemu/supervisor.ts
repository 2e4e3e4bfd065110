import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { clusterPaths } from '../state/paths';
import { loadModel } from '../state/model';
import { parseConf } from '../state/vmconf';
import { readIfExists } from '../state/files';
import { watchVmRecord } from '../state/runtime';
import { vmOwner } from '../state/vmlist';
import { getVolume } from '../state/volumes';
import { volumeFile } from '../state/volumeData';
import { isDriveName } from '../cli/vmOptions';
import { isCdrom, parseDrive } from '../cli/qm/vm';
import { qemuCommand, type GuestDisk } from './command';
import { forwardAddress } from './network';
import { qmpCommand } from './qmp';

/**
 * A real guest (`node tsrun.js qemu/supervisor.ts <dir> <vmid>`, spawned detached by `qm
 * start` in place of the process guest): runs one `qemu-system-x86_64` for the VM and
 * stands for it in the pid file, so `qm status`, `stop`, `shutdown` and `reboot` work on
 * it as on any sandbox VM. SIGTERM is the ACPI power button (QMP `system_powerdown`; the
 * guest's systemd shuts down and QEMU exits); SIGKILL (`qm stop`) takes QEMU with it
 * (`setpriv --pdeathsig`). When the guest powers off, QEMU exits and so does this: the VM
 * is stopped, as on Proxmox. It also stops the guest when the cluster directory goes or
 * the pid file stops naming it, so a forgotten test cluster leaves no QEMU running.
 */
const [dir, vmidArg] = process.argv.slice(2);
const vmid = Number(vmidArg);
const paths = clusterPaths(dir);
const log = (msg: string): void => void process.stdout.write(`${new Date().toISOString()} vm ${vmid}: ${msg}\n`);

let qemu: ChildProcess | undefined;

function powerOff(reason: string): void {
  log(`stopping QEMU (${reason})`);
  qemu?.kill('SIGKILL');
  process.exit(0);
}

process.on('SIGTERM', () => {
  log('ACPI shutdown requested');
  qmpCommand(paths.qmpSocket(vmid), 'system_powerdown').catch((err: Error) => log(`system_powerdown failed: ${err.message}`));
});
process.on('SIGINT', () => powerOff('SIGINT'));

watchVmRecord(dir, vmid, powerOff, 1000);

function start(): void {
  const node = vmOwner(dir, vmid);
  const raw = node ? readIfExists(paths.conf(node, vmid)) : undefined;
  if (!node || raw === undefined) {
    log('no configuration: nothing to start');
    process.exit(1);
  }
  const conf = parseConf(raw);
  const model = loadModel(dir);
  const disks: GuestDisk[] = [];
  for (const [key, value] of Object.entries(conf.props)) {
    if (!isDriveName(key) || !/^(ide|sata|scsi|virtio)\d+$/.test(key)) continue;
    const drive = parseDrive(value);
    if (drive.volid === 'none' || !drive.volid.includes(':')) continue;
    const vol = getVolume(dir, node, drive.volid);
    if (!vol) continue;
    disks.push({ key, file: volumeFile(dir, node, vol.storage, vol.volname), format: vol.format, cdrom: isCdrom(drive) });
  }
  const host = forwardAddress(model.gateway, vmid, conf.props.ipconfig0);
  for (const s of [paths.qmpSocket(vmid), paths.qgaSocket(vmid), paths.serialSocket(vmid)]) fs.rmSync(s, { force: true });
  const args = qemuCommand({
    vmid,
    conf,
    disks,
    accel: model.accel ?? 'tcg',
    qmpSocket: paths.qmpSocket(vmid),
    qgaSocket: paths.qgaSocket(vmid),
    serialSocket: paths.serialSocket(vmid),
    serialLog: `${paths.guestDir(vmid)}/serial.log`,
    archiveSocket: paths.archiveSocket,
    sshFrom: host ? { host, port: model.vmSshPort } : undefined,
  });
  log(`qemu-system-x86_64 ${args.join(' ')}`);
  // --pdeathsig: QEMU dies with this process, whichever way it goes.
  qemu = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'qemu-system-x86_64', ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
  qemu.on('error', (err) => {
    log(`cannot run QEMU: ${err.message}`);
    process.exit(1);
  });
  qemu.on('exit', (code, signal) => {
    log(`QEMU exited (${signal ?? `code ${code}`})`);
    process.exit(code ?? 0);
  });
}

start();
