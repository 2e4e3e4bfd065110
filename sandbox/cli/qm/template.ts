import { parseArgs, type CommandDef } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { DRIVE_NAMES, VMID } from '../vmOptions';
import { getVolume, isBaseVolname, renameToBase } from '../../state/volumes';
import { vmProcess } from '../../state/runtime';
import { storageOpDelay, withStorageLock } from '../../state/storageLock';
import { storageFor } from '../storage';
import { checkLock, diskEntries, isCdrom, loadVm, printDrive, withVmLock, writeVm } from './vm';

export const TEMPLATE_DEF: CommandDef = {
  name: 'qm template',
  args: ['vmid'],
  props: { vmid: VMID, disk: { type: 'string', optional: true, enum: DRIVE_NAMES } },
};

/**
 * `qm template` (API2/Qemu.pm `template`, QemuServer.pm `template_create`): checks, then
 * under the config lock marks the VM `template: 1` and turns each disk into a base
 * volume (vdisk_create_base, under the storage's lock), writing the config after each.
 * CD-ROMs (the cloud-init drive among them) stay as they are.
 */
export function qmTemplate(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(TEMPLATE_DEF, argv);
  const vmid = Number(p.vmid);
  const disk: string | undefined = p.disk;
  const check = () => {
    const conf = loadVm(ctx, vmid);
    checkLock(conf);
    if (conf.props.template === '1' && !disk) throw new CliError("you can't convert a template to a template");
    if (vmProcess(ctx.dir, vmid)) throw new CliError("you can't convert a VM to template if VM is running");
    return conf;
  };
  check();
  withVmLock(ctx, vmid, () => {
    const conf = check();
    conf.props.template = '1';
    writeVm(ctx, vmid, conf);
    for (const { key, drive } of diskEntries(conf)) {
      if (/^unused\d+$/.test(key) || isCdrom(drive)) continue;
      if (disk && key !== disk) continue;
      const vol = getVolume(ctx.dir, ctx.node, drive.volid);
      // volume_has_feature('template'): only a current (non-base) volume becomes a base.
      if (!vol || isBaseVolname(vol.volname)) continue;
      const storage = storageFor(ctx, vol.storage);
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
  return 0;
}
