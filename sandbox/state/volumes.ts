import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './paths';
import { createExclusive, readIfExists, writeFileAtomic } from './files';
import type { StorageDef } from './model';
import { keepsContents, moveVolumeFile, removeVolume, volumeFile, writeVolume } from './volumeData';

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
