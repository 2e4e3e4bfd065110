import fs from 'node:fs';
import { parseArgs, type CommandDef } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { DRIVE_NAMES, VMID } from '../vmOptions';
import * as f from '../formats';
import { allocVolume, defaultFormat, freeVolume, supportsFormat, type Volume } from '../../state/volumes';
import { allocationLines, requireActive, requireImages, storageFor } from '../storage';
import { probeImage, transferLines } from './image';
import { checkLock, firstFreeUnused, formatSize, loadVm, printDrive, withVmLock, writeVm } from './vm';

const DEF: CommandDef = {
  name: 'qm disk import',
  args: ['vmid', 'source', 'storage'],
  props: {
    vmid: VMID,
    source: { type: 'string' },
    storage: { type: 'string', format: f.storageId },
    format: { type: 'string', optional: true, enum: ['raw', 'qcow2', 'vmdk'] },
    'target-disk': { type: 'string', optional: true, enum: [...DRIVE_NAMES, ...Array.from({ length: 256 }, (_, i) => `unused${i}`)] },
  },
};

/**
 * `qm importdisk` / `qm disk import` (qm.pm importdisk + ImportDisk::do_import), run in
 * the CLI process, not as a task. The new volume gets the image's virtual size and
 * becomes the first free unusedN, or the `--target-disk`. Final line in the PVE >= 8.3
 * form. Disk contents are not copied: the sandbox keeps only volume metadata.
 */
export function qmImportDisk(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(DEF, argv);
  const vmid = Number(p.vmid);
  const source = p.source;
  let target: string | undefined = p['target-disk'];
  if (target && /^unused/.test(target)) target = undefined; // do_import refuses unusedN names

  checkLock(loadVm(ctx, vmid));
  let isFile = false;
  try {
    isFile = fs.statSync(source).isFile();
  } catch {
    // missing
  }
  if (!isFile) throw new CliError(`${source}: non-existent or non-regular file`);
  const storage = storageFor(ctx, p.storage);
  requireImages(storage);

  ctx.out(`importing disk '${source}' to VM ${vmid} ...`);
  const info = probeImage(source);
  let format = (p.format as Volume['format'] | undefined) ?? defaultFormat(storage);
  if (!supportsFormat(storage, format)) {
    const fallback = defaultFormat(storage);
    ctx.err(`format '${format}' is not supported by the target storage - using '${fallback}' instead`);
    format = fallback;
  }
  requireActive(storage);
  const vol = allocVolume(ctx.dir, ctx.node, storage, vmid, format, info.virtualSize, { source });
  try {
    for (const l of allocationLines(storage, vol.volname, format, info.virtualSize)) ctx.out(l);
    for (const l of transferLines(info.virtualSize)) ctx.out(l);
    const driveId = withVmLock(ctx, vmid, () => {
      const conf = loadVm(ctx, vmid);
      checkLock(conf);
      let key: string;
      if (target) {
        if (conf.props[target] !== undefined) throw new CliError(`cowardly refusing to overwrite existing entry: ${target}`);
        key = target;
        conf.props[key] = printDrive({ volid: vol.volid, opts: { size: formatSize(vol.sizeBytes) } });
      } else {
        key = firstFreeUnused(conf);
        conf.props[key] = vol.volid;
      }
      writeVm(ctx, vmid, conf);
      return { key, value: conf.props[key] };
    });
    ctx.out(`${driveId.key}: successfully imported disk '${driveId.value}'`);
  } catch (e) {
    freeVolume(ctx.dir, ctx.node, vol.volid);
    throw e;
  }
  return 0;
}
