import type { ProxmoxNode } from '../proxmox/node';
import { StorageError } from '../proxmox/errors';

/**
 * The checks of an install's placement before anything is built, in Proxmox's
 * words where Proxmox has them: the API answers them as a 400 naming the field, the worker's
 * storage step as a StorageError. Each returns why the value is refused, or undefined.
 */

/** Storage types a cloud image can be imported to (SPEC: ASSIGN_STORAGE's types). */
export const IMPORTABLE_STORAGE = ['dir', 'zfspool', 'lvmthin', 'nfs'];

/**
 * A storage for the boot disk and the cloud-init drive: it is configured on the node
 * (pve-storage `storage_config`: `storage 'x' does not exist`), of a type QemuRun imports to, active, takes disk images
 * (qemu-server `$check_storage_access`: `storage 'x' does not support vm images`) and has
 * room for `diskGb` (thin storages would take it and fail when the guest fills it).
 */
export async function storageProblem(node: ProxmoxNode, storage: string, diskGb: number | undefined): Promise<string | undefined> {
  const all = await node.storageStatus().catch((err: unknown) => {
    if (err instanceof StorageError) return [];
    throw err;
  });
  const s = all.find((x) => x.name === storage);
  if (!s) return `storage '${storage}' does not exist on node '${node.node}'`;
  if (!IMPORTABLE_STORAGE.includes(s.type)) return `storage '${storage}' has type ${s.type}; disks need one of ${IMPORTABLE_STORAGE.join(', ')}`;
  if (s.status !== 'active') return `storage '${storage}' is ${s.status}, not active`;
  const images = await node.storageStatus({ content: 'images' });
  if (!images.some((x) => x.name === storage)) return `storage '${storage}' does not support vm images`;
  if (diskGb !== undefined && diskGb * 1024 ** 3 > s.availableBytes) {
    return `storage '${storage}' has ${Math.floor(s.availableBytes / 1024 ** 3)}G free, less than the ${diskGb}G disk`;
  }
  return undefined;
}

/** A pool must exist (qemu-server create_vm's `check_pool_exist`, which Proxmox answers with a 403). */
export async function poolProblem(node: ProxmoxNode, pool: string): Promise<string | undefined> {
  const pools = await node.pools();
  if (pools.includes(pool)) return undefined;
  return `pool '${pool}' does not exist${pools.length ? ` (the pools: ${pools.join(', ')})` : ' (the cluster has no pools the API token may see)'}`;
}

/**
 * An install's extra data disks: each one's storage (its own, else the install's,
 * else ASSIGN_STORAGE) passes storageProblem, and each storage has room for everything the
 * install puts on it (the boot disk too when it lands there), as `disks[i].storage: …` or
 * `disks[i].size: …` for the first disk that does not fit.
 */
export async function disksProblem(
  node: ProxmoxNode,
  spec: { diskGb: number; storage?: string; disks?: Array<{ sizeGb: number; storage?: string }> },
  assignStorage: string,
): Promise<string | undefined> {
  const disks = spec.disks ?? [];
  if (disks.length === 0) return undefined;
  const boot = spec.storage ?? assignStorage;
  const all = await node.storageStatus().catch((err: unknown) => {
    if (err instanceof StorageError) return [];
    throw err;
  });
  const planned = new Map<string, number>([[boot, spec.diskGb]]);
  for (const [i, d] of disks.entries()) {
    const id = d.storage ?? boot;
    const problem = await storageProblem(node, id, undefined);
    if (problem) return `disks[${i}].storage: ${problem}`;
    const total = (planned.get(id) ?? 0) + d.sizeGb;
    planned.set(id, total);
    const free = all.find((x) => x.name === id)?.availableBytes;
    if (free !== undefined && total * 1024 ** 3 > free) {
      return `disks[${i}].size: storage '${id}' has ${Math.floor(free / 1024 ** 3)}G free, less than the ${total}G this install puts there`;
    }
  }
  return undefined;
}
