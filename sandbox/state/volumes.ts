import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './paths';
import { createExclusive, readIfExists, writeFileAtomic } from './files';
import type { StorageDef } from './model';
import { copyVolumeFile, keepsContents, moveVolumeFile, removeVolume, volumeFile, writeVolume } from './volumeData';

/**
 * Disk volumes on a node's storage: the metadata a storage plugin would answer for
 * volume_size_info, list and free, and with real guests their contents too (./volumeData.ts). Volume names follow
 * the plugins' conventions: `vm-<vmid>-disk-<n>` on block storages, and
 * `<vmid>/vm-<vmid>-disk-<n>.<fmt>` on file storages.
 */
export interface Volume {
  volid: string;
  storage: string;
  volname: string;
  vmid: number;
  format: 'raw' | 'qcow2' | 'vmdk';
  sizeBytes: number;
  /**
   * Bytes the volume occupies on its storage. Every storage the sandbox has is thin (dir
   * files are sparse, lvmthin allocates on write), so a new disk takes nothing, an imported
   * one what its image holds, and growing it adds nothing until the guest writes. Records
   * written before this field existed count their whole size.
   */
  dataBytes?: number;
  /** The image a disk was imported from (lets a guest know what OS it runs). */
  source?: string;
}

const isFileStorage = (s: StorageDef) => s.type === 'dir' || s.type === 'nfs';

function recordPath(dir: string, node: string, storage: string, volname: string): string {
  return path.join(clusterPaths(dir).volumesDir(node, storage), `${encodeURIComponent(volname)}.json`);
}

export function splitVolid(volid: string): { storage: string; volname: string } | undefined {
  const m = /^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$/i.exec(volid);
  return m ? { storage: m[1], volname: m[2] } : undefined;
}

/** Storages round sizes like their tools do: LVM to whole 4 MiB extents. */
export function allocatedSize(storage: StorageDef, bytes: number): number {
  if (storage.type === 'lvmthin') {
    const extent = 4 * 1024 * 1024;
    return Math.ceil(bytes / extent) * extent;
  }
  return bytes;
}

export function defaultFormat(storage: StorageDef): Volume['format'] {
  return 'raw';
}

export function supportsFormat(storage: StorageDef, format: string): boolean {
  return isFileStorage(storage) ? ['raw', 'qcow2', 'vmdk'].includes(format) : format === 'raw';
}

/** Allocates the next free `vm-<vmid>-disk-<n>` (or the cloud-init volume). */
export function allocVolume(
  dir: string,
  node: string,
  storage: StorageDef,
  vmid: number,
  format: Volume['format'],
  sizeBytes: number,
  opts: { cloudinit?: boolean; source?: string } = {},
): Volume {
  for (let n = 0; ; n++) {
    const base = opts.cloudinit ? `vm-${vmid}-cloudinit` : `vm-${vmid}-disk-${n}`;
    const volname = isFileStorage(storage) ? `${vmid}/${base}.${format}` : base;
    const vol: Volume = {
      volid: `${storage.id}:${volname}`,
      storage: storage.id,
      volname,
      vmid,
      format,
      sizeBytes: allocatedSize(storage, sizeBytes),
      // A cloud-init drive is written in full; a disk holds what was imported into it.
      dataBytes: opts.cloudinit ? allocatedSize(storage, sizeBytes) : opts.source ? fileBytes(opts.source) : 0,
      ...(opts.source ? { source: opts.source } : {}),
    };
    if (createExclusive(recordPath(dir, node, storage.id, volname), JSON.stringify(vol))) {
      if (keepsContents(dir)) {
        try {
          writeVolume(volumeFile(dir, node, storage.id, volname), format, vol.sizeBytes, opts.source);
        } catch (err) {
          fs.rmSync(recordPath(dir, node, storage.id, volname), { force: true });
          throw err;
        }
      }
      return vol;
    }
    if (opts.cloudinit) throw new Error(`volume '${vol.volid}' already exists`);
  }
}

function fileBytes(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

export function getVolume(dir: string, node: string, volid: string): Volume | undefined {
  const v = splitVolid(volid);
  if (!v) return undefined;
  const raw = readIfExists(recordPath(dir, node, v.storage, v.volname));
  return raw ? (JSON.parse(raw) as Volume) : undefined;
}

export function saveVolume(dir: string, node: string, vol: Volume): void {
  writeFileAtomic(recordPath(dir, node, vol.storage, vol.volname), JSON.stringify(vol));
}

export function freeVolume(dir: string, node: string, volid: string): void {
  const v = splitVolid(volid);
  if (!v) return;
  removeVolume(volumeFile(dir, node, v.storage, v.volname));
  fs.rmSync(recordPath(dir, node, v.storage, v.volname), { force: true });
}

export function listVolumes(dir: string, node: string, storage: string): Volume[] {
  const d = clusterPaths(dir).volumesDir(node, storage);
  let files: string[] = [];
  try {
    files = fs.readdirSync(d);
  } catch {
    return [];
  }
  return files
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(fs.readFileSync(path.join(d, f), 'utf8')) as Volume);
}

/** Moves a volume record to another node (what `pvesm import` on the target amounts to). */
export function moveVolume(dir: string, from: string, to: string, volid: string): void {
  const vol = getVolume(dir, from, volid);
  if (!vol) return;
  saveVolume(dir, to, vol);
  moveVolumeFile(volumeFile(dir, from, vol.storage, vol.volname), volumeFile(dir, to, vol.storage, vol.volname));
  freeVolume(dir, from, volid);
}

/**
 * Whether a volume is a base volume (a template's disk): `base-<vmid>-…`, in a file
 * storage's `<vmid>/` folder. A linked clone's volname names its base first
 * (`100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2`) and is no base itself.
 */
export function isBaseVolname(volname: string): boolean {
  return /^(?:\d+\/)?base-\d+-[^/]+$/.test(volname);
}

/**
 * create_base: `vm-<vmid>-disk-N` becomes `base-<vmid>-disk-N` (LvmThinPlugin lvrename,
 * Plugin.pm rename in the VM's folder), contents and all.
 */
export function renameToBase(dir: string, node: string, vol: Volume): Volume {
  const volname = vol.volname.replace(/(^|\/)vm-(\d+-[^/]+)$/, '$1base-$2');
  const base: Volume = { ...vol, volname, volid: `${vol.storage}:${volname}` };
  saveVolume(dir, node, base);
  moveVolumeFile(volumeFile(dir, node, vol.storage, vol.volname), volumeFile(dir, node, vol.storage, volname));
  fs.rmSync(recordPath(dir, node, vol.storage, vol.volname), { force: true });
  return base;
}

/**
 * clone_image: a new volume of `vmid` that shares `base`'s blocks. Its name is the first
 * free `vm-<vmid>-disk-N` (find_free_diskname looks at every volume of the VM), on a file
 * storage a qcow2 under the base's path (its backing file), on ZFS `<base>/<name>`, on
 * LVM-thin a thin snapshot with a name of its own. It takes no space until written.
 */
export function cloneVolume(dir: string, node: string, storage: StorageDef, base: Volume, vmid: number): Volume {
  const taken = new Set(listVolumes(dir, node, storage.id).map((v) => /(?:^|\/)(vm-\d+-disk-\d+)(?:\.\w+)?$/.exec(v.volname)?.[1]));
  for (let n = 0; ; n++) {
    const name = `vm-${vmid}-disk-${n}`;
    if (taken.has(name)) continue;
    const format: Volume['format'] = isFileStorage(storage) ? 'qcow2' : base.format;
    const volname = isFileStorage(storage) ? `${base.volname}/${vmid}/${name}.qcow2` : storage.type === 'zfspool' ? `${base.volname}/${name}` : name;
    const vol: Volume = { volid: `${storage.id}:${volname}`, storage: storage.id, volname, vmid, format, sizeBytes: base.sizeBytes, dataBytes: 0, ...(base.source ? { source: base.source } : {}) };
    if (!createExclusive(recordPath(dir, node, storage.id, volname), JSON.stringify(vol))) continue;
    // Real guests boot the clone's contents: a sparse copy stands in for shared blocks.
    copyVolumeFile(volumeFile(dir, node, storage.id, base.volname), volumeFile(dir, node, storage.id, volname), base.format, format);
    return vol;
  }
}

/** Linked clones of a file storage's base volume (vdisk_free refuses to free a base that has some). */
export function linkedClonesOf(dir: string, node: string, base: Volume): Volume[] {
  return listVolumes(dir, node, base.storage).filter((v) => v.volname.startsWith(`${base.volname}/`));
}
