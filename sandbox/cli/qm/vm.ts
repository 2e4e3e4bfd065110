import fs from 'node:fs';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { configDigest, parseConf, serializeConf, type VmConf } from '../../state/vmconf';
import { createExclusive, LockTimeoutError, readIfExists, withLock, withSharedLock, writeFileAtomic } from '../../state/files';
import { isDriveName } from '../vmOptions';

/**
 * Loading, locking and writing the local node's VM configs, with qemu-server's errors.
 * `qm` only ever sees its own node's directory, like `/etc/pve/qemu-server`.
 */

export function confExists(ctx: Ctx, vmid: number): boolean {
  return fs.existsSync(ctx.paths.conf(ctx.node, vmid));
}

export function loadVm(ctx: Ctx, vmid: number): VmConf {
  const raw = readIfExists(ctx.paths.conf(ctx.node, vmid));
  if (raw === undefined) throw new CliError(`Configuration file '${ctx.paths.confDisplay(ctx.node, vmid)}' does not exist`);
  return parseConf(raw);
}

/**
 * `--digest`: the change was meant for this very config (update_vm's and resize_vm's check,
 * before the lock's): the SHA1 of the config file, as `pvesh get .../config` reports it.
 */
export function assertDigest(ctx: Ctx, vmid: number, digest: string | undefined): void {
  if (!digest) return;
  const raw = readIfExists(ctx.paths.conf(ctx.node, vmid));
  if (raw === undefined) return; // load_config fails next, with its own message
  if (configDigest(raw) !== digest) throw new CliError('checksum mismatch (file change by other user?)');
}

export function writeVm(ctx: Ctx, vmid: number, conf: VmConf, node = ctx.node): void {
  writeFileAtomic(ctx.paths.conf(node, vmid), serializeConf(conf), 0o640);
}

export function createVmExclusive(ctx: Ctx, vmid: number, conf: VmConf): boolean {
  return createExclusive(ctx.paths.conf(ctx.node, vmid), serializeConf(conf));
}

export function checkLock(conf: VmConf): void {
  if (conf.props.lock) throw new CliError(`VM is locked (${conf.props.lock})`);
}

/** Where PVE keeps a VM's config lock (`PVE::QemuConfig->config_file_lock`). */
export const vmLockFile = (locksDir: string, vmid: number) => `${locksDir}/lock-${vmid}.conf`;

/**
 * PVE's per-VM flock (`/var/lock/qemu-server/lock-<vmid>.conf`): pve-common
 * `PVE::Tools::lock_file_full` waits `timeoutMs` (AbstractConfig `lock_config`: 10 s;
 * the sandbox's `lockTimeoutMs` when set), then fails with its `got timeout` text.
 * `shared` is AbstractConfig's `lock_config_shared` (flock LOCK_SH).
 */
export function withVmLock<T>(ctx: Ctx, vmid: number, fn: () => T, timeoutMs = ctx.model.lockTimeoutMs ?? 10_000, shared = false): T {
  try {
    return (shared ? withSharedLock : withLock)(vmLockFile(ctx.paths.locksDir, vmid), timeoutMs, fn);
  } catch (e) {
    if (e instanceof LockTimeoutError) {
      throw new CliError(`can't lock file '/var/lock/qemu-server/lock-${vmid}.conf' - got timeout`);
    }
    throw e;
  }
}

const UNITS: Array<[string, number]> = [
  ['T', 1024 ** 4],
  ['G', 1024 ** 3],
  ['M', 1024 ** 2],
  ['K', 1024],
];

/** `size=` as print_drive writes it: the largest unit that divides the size exactly. */
export function formatSize(bytes: number): string {
  for (const [u, n] of UNITS) if (bytes % n === 0 && bytes >= n) return `${bytes / n}${u}`;
  return String(bytes);
}

export function parseSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)([KMGT])?$/.exec(text);
  if (!m) return undefined;
  const mult = m[2] ? UNITS.find(([u]) => u === m[2])![1] : 1;
  return Math.round(Number(m[1]) * mult);
}

export interface Drive {
  volid: string;
  opts: Record<string, string>;
}

export function parseDrive(value: string): Drive {
  const [first, ...rest] = value.split(',');
  const opts: Record<string, string> = {};
  let volid = first;
  if (first.startsWith('file=')) volid = first.slice(5);
  for (const part of rest) {
    const eq = part.indexOf('=');
    if (eq > 0) opts[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return { volid, opts };
}

/** Volume ID first, then the options in alphabetical order. */
export function printDrive(d: Drive): string {
  return [d.volid, ...Object.keys(d.opts).sort().map((k) => `${k}=${d.opts[k]}`)].join(',');
}

export const isCdrom = (d: Drive) => d.opts.media === 'cdrom';
export const isCloudinit = (d: Drive) => /(^|[:/])vm-\d+-cloudinit(\.\w+)?$/.test(d.volid);

/** Drive keys of a config that hold a disk volume (not CD-ROMs), including unusedN. */
export function diskEntries(conf: VmConf): Array<{ key: string; drive: Drive }> {
  return Object.entries(conf.props)
    .filter(([k]) => isDriveName(k) || /^unused\d+$/.test(k))
    .map(([key, v]) => ({ key, drive: parseDrive(v) }))
    .filter(({ drive }) => drive.volid !== 'none' && drive.volid.includes(':'));
}

export function firstFreeUnused(conf: VmConf): string {
  for (let i = 0; ; i++) if (conf.props[`unused${i}`] === undefined) return `unused${i}`;
}

/** qemu-server's default boot order: first disk, first CD-ROM, first NIC. */
export function defaultBootOrder(conf: VmConf): string {
  const buses = ['ide', 'sata', 'scsi', 'virtio'];
  const drives = Object.keys(conf.props)
    .filter((k) => isDriveName(k) && /^(ide|sata|scsi|virtio)\d+$/.test(k))
    .sort((a, b) => {
      const [, ba, na] = /^([a-z]+)(\d+)$/.exec(a)!;
      const [, bb, nb] = /^([a-z]+)(\d+)$/.exec(b)!;
      return buses.indexOf(ba) - buses.indexOf(bb) || Number(na) - Number(nb);
    });
  const disk = drives.find((k) => !isCdrom(parseDrive(conf.props[k])));
  const cdrom = drives.find((k) => isCdrom(parseDrive(conf.props[k])));
  const nic = Object.keys(conf.props)
    .filter((k) => /^net\d+$/.test(k))
    .sort((a, b) => Number(a.slice(3)) - Number(b.slice(3)))[0];
  const order = [disk, cdrom, nic].filter(Boolean);
  return order.length ? `order=${order.join(';')}` : '';
}
