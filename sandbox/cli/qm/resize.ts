import { parseArgs, type CommandDef, type Params } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { DRIVE_NAMES, VMID } from '../vmOptions';
import { DISK_SIZE } from '../formats';
import { allocatedSize, getVolume, saveVolume } from '../../state/volumes';
import { growVolume, keepsContents, volumeFile } from '../../state/volumeData';
import { storageFor } from '../storage';
import { assertDigest, checkLock, formatSize, isCdrom, loadVm, parseDrive, printDrive, withVmLock, writeVm } from './vm';

export const RESIZE_DEF: CommandDef = {
  name: 'qm disk resize',
  args: ['vmid', 'disk', 'size'],
  props: {
    vmid: VMID,
    disk: { type: 'string', enum: DRIVE_NAMES },
    size: { type: 'string', pattern: DISK_SIZE },
    skiplock: { type: 'boolean', optional: true },
    digest: { type: 'string', optional: true, maxLength: 64 },
  },
};

const GiB = 1024 ** 3;

function lvmLines(volname: string, from: number, to: number): string[] {
  const ext = (b: number) => Math.ceil(b / (4 * 1024 * 1024));
  const gib = (b: number) => (b / GiB).toFixed(2);
  return [
    `  Size of logical volume pve/${volname} changed from ${gib(from)} GiB (${ext(from)} extents) to ${gib(to)} GiB (${ext(to)} extents).`,
    `  Logical volume pve/${volname} successfully resized.`,
  ];
}

/**
 * `qm resize` / `qm disk resize`: resize_vm. Since qemu-server 8.0 the work runs as a task
 * and the CLI has no exit handler for it, so a failure inside the task (missing config,
 * lock, unknown disk, shrinking) is printed on stderr and the exit code is still 0.
 * Only parameter errors, raised before the task, exit non-zero.
 */
export function qmResize(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(RESIZE_DEF, argv);
  try {
    resizeDisk(ctx, p);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    ctx.err(e.message);
  }
  return 0;
}

/** resize_vm's task: throws what the task fails with. */
export function resizeDisk(ctx: Ctx, p: Params): void {
  const vmid = Number(p.vmid);
  withVmLock(ctx, vmid, () => {
    assertDigest(ctx, vmid, p.digest);
    const conf = loadVm(ctx, vmid);
    if (p.skiplock !== '1') checkLock(conf);
    const value = conf.props[p.disk];
    if (value === undefined) throw new CliError(`disk '${p.disk}' does not exist`);
    const drive = parseDrive(value);
    if (!drive.volid || drive.volid === 'none') throw new CliError(`disk '${p.disk}' has no associated volume`);
    if (isCdrom(drive)) throw new CliError("you can't resize a cdrom");
    const vol = getVolume(ctx.dir, ctx.node, drive.volid);
    if (!vol) throw new CliError(`Could not determine current size of volume '${drive.volid}'`);
    const storage = storageFor(ctx, vol.storage);

    const m = /^(\+)?(\d+(?:\.\d+)?)([KMGT])?$/.exec(p.size)!;
    const unit = m[3] ? 1024 ** ('KMGT'.indexOf(m[3]) + 1) : 1;
    let newSize = Number(m[2]) * unit;
    if (m[1]) newSize += vol.sizeBytes;
    newSize = Math.floor(newSize);
    if (newSize < vol.sizeBytes) throw new CliError('shrinking disks is not supported');
    if (newSize === vol.sizeBytes) return;

    if (storage.type === 'lvmthin') for (const l of lvmLines(vol.volname, vol.sizeBytes, allocatedSize(storage, newSize))) ctx.out(l);
    else ctx.out('Image resized.');
    if (keepsContents(ctx.dir)) growVolume(volumeFile(ctx.dir, ctx.node, vol.storage, vol.volname), vol.format, allocatedSize(storage, newSize));
    saveVolume(ctx.dir, ctx.node, { ...vol, sizeBytes: allocatedSize(storage, newSize) });
    drive.opts.size = formatSize(newSize);
    conf.props[p.disk] = printDrive(drive);
    writeVm(ctx, vmid, conf);
  });
}
