import type { StorageStatus } from '../proxmox/parse';

/**
 * Why a disk of `diskGb` GiB does not fit in a storage, or undefined when it does. Thin
 * storages would accept it and fail later, when the guest fills it; refusing up front is the
 * answer a client can act on.
 */
export function diskTooBig(diskGb: number, storage: Pick<StorageStatus, 'name' | 'availableBytes'>): string | undefined {
  if (diskGb * 1024 ** 3 <= storage.availableBytes) return undefined;
  const free = Math.floor(storage.availableBytes / 1024 ** 3);
  return `disk: ${diskGb}G is more than the free space of storage '${storage.name}' (${free}G free)`;
}
