import path from 'node:path';
import { CliError } from './errors';
import type { Ctx } from './context';
import type { StorageDef } from '../state/model';
import { listVolumes } from '../state/volumes';

/** storage.cfg look-ups with PVE::Storage's error texts. */
export function storageFor(ctx: Pick<Ctx, 'model' | 'node'>, id: string, node = ctx.node): StorageDef {
  const s = ctx.model.storages.find((x) => x.id === id);
  if (!s) throw new CliError(`storage '${id}' does not exist`);
  if (!s.enabled) throw new CliError(`storage '${id}' is disabled`);
  if (s.nodes && !s.nodes.includes(node)) throw new CliError(`storage '${id}' is not available on node '${node}'`);
  return s;
}

export function requireImages(s: StorageDef): void {
  if (!s.content.includes('images')) throw new CliError(`storage ${s.id} does not support vm images`);
}

/** Activating an inactive storage (an NFS server that does not answer) fails. */
export function requireActive(s: StorageDef): void {
  if (!s.active) throw new CliError(`storage '${s.id}' is not online`);
}

export function usedBytes(ctx: Ctx, s: StorageDef, node: string): number {
  if (!s.active) return 0;
  // What the volumes hold, not their virtual size: pvesm reports a thin storage's real use.
  return s.baseUsedBytes + listVolumes(ctx.dir, node, s.id).reduce((sum, v) => sum + (v.dataBytes ?? v.sizeBytes), 0);
}

/** Where a file-based storage lives on the node (storage.cfg's `path`); none for block storages. */
export function storagePath(s: StorageDef): string | undefined {
  if (s.type === 'dir' && s.id === 'local') return '/var/lib/vz';
  return s.type === 'dir' || s.type === 'nfs' ? `/mnt/pve/${s.id}` : undefined;
}

/**
 * A volume of `import` or `iso` content (`local:import/debian-12.qcow2`) as the file the
 * sandbox keeps for it, and the path Proxmox would print for it. Undefined for other volids.
 */
export function contentFile(ctx: Ctx, volid: string): { file: string; shown: string } | undefined {
  const m = /^([a-z][a-z0-9\-_.]*[a-z0-9]):(import|iso)\/([^/]+)$/i.exec(volid);
  if (!m) return undefined;
  const s = storageFor(ctx, m[1]);
  const base = storagePath(s);
  if (!base) throw new CliError(`storage '${s.id}' is not a file based storage`);
  const dir = m[2] === 'iso' ? 'template/iso' : 'import';
  return { file: path.join(ctx.paths.contentDir(ctx.node, s.id, m[2]), m[3]), shown: `${base}/${dir}/${m[3]}` };
}

/** The lines the storage tools print when a volume is created. */
export function allocationLines(s: StorageDef, volname: string, format: string, sizeBytes: number): string[] {
  if (s.type === 'lvmthin') return [`  Logical volume "${volname}" created.`];
  const base = storagePath(s);
  if (base) {
    const prealloc = format === 'qcow2' ? ' cluster_size=65536 preallocation=metadata compression_type=zlib' : ' preallocation=off';
    return [`Formatting '${base}/images/${volname}', fmt=${format} size=${sizeBytes}${prealloc}`];
  }
  return [];
}

/**
 * A volume of a file-based storage as pve-storage's `parse_volname` reads it (Plugin.pm:
 * `snippets/<file>` is of type `snippets`, and the directory plugins die on a name they do
 * not know), with the file the sandbox keeps for it and the path Proxmox would print.
 * Only the types the sandbox keeps files for (import, iso, snippets) have a file.
 */
export function fileVolume(ctx: Pick<Ctx, 'model' | 'node' | 'paths'>, volid: string, node = ctx.node): { vtype: string; file?: string; shown: string } {
  const m = /^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$/i.exec(volid);
  if (!m) throw new CliError(`unable to parse volume ID '${volid}'`);
  const s = storageFor(ctx, m[1], node);
  const base = storagePath(s);
  const volname = m[2];
  if (!base) throw new CliError(`unable to parse ${s.type === 'lvmthin' ? 'lvm' : s.type} volume name '${volname}'`);
  const typed = /^(snippets|import|iso)\/([^/]+)$/.exec(volname);
  const other = /^(images|rootdir|vztmpl|backup)\//.exec(volname);
  if (!typed && !other) throw new CliError(`unable to parse directory volume name '${volname}'`);
  if (!typed) return { vtype: other![1], shown: `${base}/${volname}` };
  const [, vtype, name] = typed;
  const dir = vtype === 'iso' ? 'template/iso' : vtype;
  return { vtype, file: path.join(ctx.paths.contentDir(node, s.id, vtype), name), shown: `${base}/${dir}/${name}` };
}
