import fs from 'node:fs';
import { parseArgs, type CommandDef } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { freeVolume, getVolume, isBaseVolname, linkedClonesOf } from '../../state/volumes';
import { releaseVmid } from '../../state/vmlist';
import { removeVmFromPools } from '../../state/pools';
import { clearVmProcess, vmProcess } from '../../state/runtime';
import { checkLock, diskEntries, isCdrom, loadVm, withVmLock, writeVm } from './vm';

const DEF: CommandDef = {
  name: 'qm destroy',
  args: ['vmid'],
  props: {
    vmid: VMID,
    purge: { type: 'boolean', optional: true },
    skiplock: { type: 'boolean', optional: true },
    'destroy-unreferenced-disks': { type: 'boolean', optional: true },
  },
};

/**
 * `qm destroy`: refuses a running, locked or protected VM; frees every disk the config
 * references (attached or unusedN), then removes the config. The guest's root file system
 * (sandbox/guests/<vmid>) is the content of those disks, so it goes too.
 */
export function qmDestroy(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(DEF, argv);
  const vmid = Number(p.vmid);
  withVmLock(ctx, vmid, () => {
    const conf = loadVm(ctx, vmid);
    if (p.skiplock !== '1' && conf.props.lock !== 'suspended') checkLock(conf);
    if (vmProcess(ctx.dir, vmid)) throw new CliError(`VM ${vmid} is running - destroy failed`);
    if (conf.props.protection === '1') throw new CliError(`can't remove VM ${vmid} - protection mode enabled`);
    // destroy_vm: a template's base volume that linked clones still use stays (LVM-thin's
    // thin snapshots do not depend on their origin, so there it may go).
    if (conf.props.template === '1') {
      for (const { drive } of diskEntries(conf)) {
        if (isCdrom(drive)) continue;
        const vol = getVolume(ctx.dir, ctx.node, drive.volid);
        if (vol && isBaseVolname(vol.volname) && linkedClonesOf(ctx.dir, ctx.node, vol).length > 0) {
          throw new CliError(`base volume '${drive.volid}' is still in use by linked cloned`);
        }
      }
    }

    writeVm(ctx, vmid, { ...conf, props: { ...conf.props, lock: 'destroyed' } });
    for (const { drive } of diskEntries(conf)) {
      if (isCdrom(drive) && !/cloudinit/.test(drive.volid)) continue;
      const vol = getVolume(ctx.dir, ctx.node, drive.volid);
      if (!vol) continue;
      const storage = ctx.model.storages.find((s) => s.id === vol.storage);
      if (storage?.type === 'lvmthin') ctx.out(`  Logical volume "${vol.volname}" successfully removed.`);
      freeVolume(ctx.dir, ctx.node, vol.volid);
    }
    if (p.purge === '1') {
      ctx.out(`purging VM ${vmid} from related configurations..`);
      // remove_vm_access: ACLs and pool membership (without --purge the VM stays listed in its pool).
      removeVmFromPools(ctx.dir, ctx.model, vmid);
    }
    fs.rmSync(ctx.paths.conf(ctx.node, vmid), { force: true });
    releaseVmid(ctx.dir, vmid);
    fs.rmSync(ctx.paths.templatedAt(vmid), { force: true });
    clearVmProcess(ctx.dir, vmid);
    fs.rmSync(ctx.paths.guestDir(vmid), { recursive: true, force: true });
  });
  return 0;
}
