import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type CommandDef, type Params } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { DRIVE_NAMES, VMID } from '../vmOptions';
import { getVolume, isBaseVolname, renameToBase } from '../../state/volumes';
import { vmProcess } from '../../state/runtime';
import { storageOpDelay, withStorageLock } from '../../state/storageLock';
import { takeStepFault } from '../../state/faults';
import { storageFor } from '../storage';
import { checkLock, diskEntries, isCdrom, loadVm, printDrive, withVmLock, writeVm } from './vm';

export const TEMPLATE_DEF: CommandDef = {
  name: 'qm template',
  args: ['vmid'],
  props: { vmid: VMID, disk: { type: 'string', optional: true, enum: DRIVE_NAMES } },
};

/**
 * `qm template` (qemu-server API2/Qemu.pm `template`): its checks answer the call; the
 * conversion is a task (templateVm). qm.pm runs the API method with no `$upid_exit`, so
 * a task that fails still exits 0: pve-common's RESTEnvironment (`fork_worker`, whose
 * `tee_worker` relays a CLI task) prints the task's output on stdout and the message of
 * its `TASK ERROR:` line on stderr, and nothing tells the caller more. Only the checks
 * before the task exit non-zero.
 */
export function qmTemplate(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(TEMPLATE_DEF, argv);
  checkTemplate(ctx, Number(p.vmid), p.disk);
  try {
    templateVm(ctx, p);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    ctx.err(e.message.replace(/\n+$/, '').replace(/\n/g, ' '));
  }
  return 0;
}

/** `template`'s `$load_and_check`: before the task (the API answers these itself) and again in it. */
export function checkTemplate(ctx: Ctx, vmid: number, disk: string | undefined) {
  const conf = loadVm(ctx, vmid);
  checkLock(conf);
  if (conf.props.template === '1' && !disk) throw new CliError("you can't convert a template to a template");
  if (vmProcess(ctx.dir, vmid)) throw new CliError("you can't convert a VM to template if VM is running");
  return conf;
}

/**
 * The `qmtemplate` task (`$realcmd`, QemuServer.pm `template_create`): under the config
 * lock, checks again, writes `template: 1` first, then turns each disk into a base volume
 * (vdisk_create_base, under the storage's lock), writing the config after each. A failure
 * there (the storage lock's timeout, or a fault at `create_base`) ends the task with
 * `template: 1` written and the disks not yet converted still `vm-<vmid>-disk-N`; `disk`
 * converts only that one, as on a template. CD-ROMs (the cloud-init drive among them)
 * stay as they are. Throws what the task fails with.
 */
export function templateVm(ctx: Ctx, p: Params): void {
  const vmid = Number(p.vmid);
  const disk: string | undefined = p.disk;
  withVmLock(ctx, vmid, () => {
    const conf = checkTemplate(ctx, vmid, disk);
    if (conf.props.template !== '1') markTemplated(ctx, vmid);
    conf.props.template = '1';
    writeVm(ctx, vmid, conf);
    for (const { key, drive } of diskEntries(conf)) {
      if (/^unused\d+$/.test(key) || isCdrom(drive)) continue;
      if (disk && key !== disk) continue;
      const vol = getVolume(ctx.dir, ctx.node, drive.volid);
      // volume_has_feature('template'): only a current (non-base) volume becomes a base.
      if (!vol || isBaseVolname(vol.volname)) continue;
      const storage = storageFor(ctx, vol.storage);
      const fault = takeStepFault(ctx.stepFaults, 'create_base');
      if (fault !== undefined) throw new CliError(fault);
      const base = withStorageLock(ctx.model, ctx.paths.locksDir, storage, () => {
        storageOpDelay(ctx.model);
        return renameToBase(ctx.dir, ctx.node, vol);
      });
      if (storage.type === 'lvmthin') {
        ctx.out(`  Renamed "${vol.volname}" to "${base.volname}" in volume group "pve"`);
        ctx.out(`  Logical volume pve/${base.volname} changed.`);
      }
      conf.props[key] = printDrive({ ...drive, volid: base.volid });
      writeVm(ctx, vmid, conf);
    }
  });
}

/** When the config became a template: what /cluster/resources reports a status cycle later. */
function markTemplated(ctx: Ctx, vmid: number): void {
  const file = ctx.paths.templatedAt(vmid);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '');
}
