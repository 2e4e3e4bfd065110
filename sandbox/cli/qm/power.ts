import { parseArgs, type CommandDef } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { clearVmProcess, signalVm, spawnVm, vmProcess } from '../../state/runtime';
import { checkLock, confExists, isCloudinit, loadVm, parseDrive, withVmLock } from './vm';
import { isDriveName } from '../vmOptions';
import type { VmConf } from '../../state/vmconf';
import { bootDisk } from '../../state/boot';
import { getVolume } from '../../state/volumes';
import { holdsData, keepsContents, volumeFile } from '../../state/volumeData';
import { writeCloudinitDrive } from '../../qemu/cloudinitDrive';
import { customCloudinitFiles } from './cicustom';
import { checkNetdevMtus, plugNetworks } from './bridges';
import { restartAfterReboot } from '../qmeventd';

/**
 * Power commands. Each is a worker task in PVE: exit 0 on success, 255 when the task
 * fails. "Running" means the VM's sandbox QEMU process (sandbox/vm/main.ts) is alive.
 * stop pulls the plug (SIGKILL); shutdown is the ACPI request (SIGTERM, the guest goes
 * down in its own time); reboot is that shutdown, and qmeventd starts the VM again after.
 */

const def = (name: string, extra: CommandDef['props'] = {}): CommandDef => ({
  name: `qm ${name}`,
  args: ['vmid'],
  props: { vmid: VMID, skiplock: { type: 'boolean', optional: true }, timeout: { type: 'integer', optional: true, minimum: 0 }, ...extra },
});

const START = def('start', { machine: { type: 'string', optional: true }, 'force-cpu': { type: 'string', optional: true } });
const STOP = def('stop', { keepActive: { type: 'boolean', optional: true }, 'overrule-shutdown': { type: 'boolean', optional: true } });
const SHUTDOWN = def('shutdown', { forceStop: { type: 'boolean', optional: true }, keepActive: { type: 'boolean', optional: true } });
const REBOOT: CommandDef = { name: 'qm reboot', args: ['vmid'], props: { vmid: VMID, timeout: { type: 'integer', optional: true, minimum: 0 } } };

const noConfig = (ctx: Ctx, vmid: number) => `unable to find configuration file for VM ${vmid} on node '${ctx.node}'`;

/** vm_start: refuses templates, running VMs and locks; spawns the QEMU stand-in. */
export function startVm(ctx: Ctx, vmid: number, skiplock = false): void {
  withVmLock(ctx, vmid, () => {
    const conf = loadVm(ctx, vmid);
    if (!skiplock) checkLock(conf);
    if (conf.props.template === '1') throw new CliError("you can't start a vm if it's a template");
    if (vmProcess(ctx.dir, vmid)) throw new CliError(`VM ${vmid} already running`);
    const real = realGuest(ctx, conf);
    for (const [key, value] of Object.entries(conf.props)) {
      const drive = parseDrive(value);
      if (!isDriveName(key) || !isCloudinit(drive)) continue;
      ctx.out('generating cloud-init ISO');
      // Read on every start, as generate_nocloud does: a snippet missing on this node fails the start.
      const custom = customCloudinitFiles(ctx, conf);
      const vol = real ? getVolume(ctx.dir, ctx.node, drive.volid) : undefined;
      if (vol) writeCloudinitDrive(conf, vmid, { file: volumeFile(ctx.dir, ctx.node, vol.storage, vol.volname), format: vol.format, sizeBytes: vol.sizeBytes }, custom);
    }
    // qemu-server OVMF.pm: OVMF without efidisk0 boots with a throw-away copy of the vars (log_warn).
    if (conf.props.bios === 'ovmf' && conf.props.efidisk0 === undefined) ctx.err('WARN: no efidisk configured! Using temporary efivars disk.');
    // config_to_command (its NICs' MTUs) before QEMU runs the NICs' ifup scripts.
    checkNetdevMtus(ctx, conf);
    plugNetworks(ctx, vmid, conf);
    spawnVm(ctx.dir, vmid, real ? 'qemu/supervisor.ts' : 'vm/main.ts');
  });
}

/**
 * Whether the VM boots as a real guest: the cluster runs real guests and the boot disk
 * holds something to boot (the process guests' stand-in images hold nothing, and a VM
 * made from one still runs as a process guest, e.g. Ubuntu and Rocky, whose archives
 * are not reachable to build real images from).
 */
function realGuest(ctx: Ctx, conf: VmConf): boolean {
  if (!keepsContents(ctx.dir)) return false;
  const disk = bootDisk(conf);
  const vol = disk ? getVolume(ctx.dir, ctx.node, parseDrive(conf.props[disk]).volid) : undefined;
  return !!vol && holdsData(volumeFile(ctx.dir, ctx.node, vol.storage, vol.volname), vol.format);
}

export function qmStart(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(START, argv);
  startVm(ctx, Number(p.vmid), p.skiplock === '1');
  return 0;
}

export function qmStop(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(STOP, argv);
  const vmid = Number(p.vmid);
  if (!confExists(ctx, vmid)) throw new CliError(noConfig(ctx, vmid));
  withVmLock(ctx, vmid, () => {
    if (p.skiplock !== '1') checkLock(loadVm(ctx, vmid));
    // Not running is no error for stop.
    signalVm(ctx.dir, vmid, 'SIGKILL', 5000);
    clearVmProcess(ctx.dir, vmid);
  });
  return 0;
}

/** ACPI shutdown; the guest takes its time. Returns false on timeout. */
function shutdownVm(ctx: Ctx, vmid: number, timeoutSec: number, forceStop: boolean): void {
  if (signalVm(ctx.dir, vmid, 'SIGTERM', timeoutSec * 1000)) {
    clearVmProcess(ctx.dir, vmid);
    return;
  }
  if (!forceStop) throw new CliError('VM quit/powerdown failed - got timeout');
  ctx.out('VM still running - terminating now with SIGTERM');
  signalVm(ctx.dir, vmid, 'SIGKILL', 5000);
  clearVmProcess(ctx.dir, vmid);
}

export function qmShutdown(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(SHUTDOWN, argv);
  const vmid = Number(p.vmid);
  if (!confExists(ctx, vmid)) {
    // The paused-check before the fork warns, then the task fails with the same text.
    ctx.err(`${noConfig(ctx, vmid)}\n`);
    throw new CliError(noConfig(ctx, vmid));
  }
  if (!vmProcess(ctx.dir, vmid)) {
    ctx.err(`VM ${vmid} not running\n`);
    return 0;
  }
  withVmLock(ctx, vmid, () => {
    if (p.skiplock !== '1') checkLock(loadVm(ctx, vmid));
    shutdownVm(ctx, vmid, Number(p.timeout ?? 60), p.forceStop === '1');
  });
  return 0;
}

export function qmReboot(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(REBOOT, argv);
  const vmid = Number(p.vmid);
  const conf = loadVm(ctx, vmid);
  if (!vmProcess(ctx.dir, vmid)) {
    ctx.err(`VM ${vmid} not running\n`);
    throw new CliError(`VM ${vmid} not running`);
  }
  checkLock(conf);
  // vm_reboot (qemu-server PVE/QemuServer.pm) only shuts the guest down under the config
  // lock; qmeventd starts it again once QEMU has exited (../qmeventd.ts).
  withVmLock(ctx, vmid, () => shutdownVm(ctx, vmid, Number(p.timeout ?? 60), false));
  restartAfterReboot(ctx.dir, ctx.node, vmid);
  return 0;
}
