import { CliError } from '../cli/errors';
import { LockTimeoutError, sleepSync, withLock } from './files';
import type { ClusterModel, StorageDef } from './model';

/**
 * pve-storage's storage lock (Plugin.pm `cluster_lock_storage`), taken around the volume
 * operations that change a storage's namespace: create_base (`qm template`) and
 * clone_image (linked clones). A local storage is a flock on
 * `/var/lock/pve-manager/pve-storage-<id>`, a shared one a pmxcfs lock; both wait 10 s
 * (the caller passes no timeout) and then fail. This is the lock that makes the third of
 * several parallel clones of one template fail on a slow storage. The timeout is a `die`
 * of the task that waited (a CliError), whose message it fails with.
 */
export function withStorageLock<T>(model: ClusterModel, locksDir: string, storage: StorageDef, fn: () => T): T {
  try {
    return withLock(`${locksDir}/pve-storage-${storage.id}`, model.storageLockTimeoutMs ?? 10_000, fn);
  } catch (e) {
    if (!(e instanceof LockTimeoutError)) throw e;
    throw new CliError(
      isSharedStorage(storage)
        ? `cfs-lock 'storage-${storage.id}' error: got lock request timeout`
        : `can't lock file '/var/lock/pve-manager/pve-storage-${storage.id}' - got timeout`,
    );
  }
}

/** The sandbox's shared storage type: NFS (pve-storage's NFSPlugin is `shared` by nature). */
export const isSharedStorage = (s: StorageDef): boolean => s.type === 'nfs';

/**
 * What holding the lock costs: lvcreate's thin snapshot and the activation change after
 * it take about half a second on an idle node (model.storageOpMs overrides it).
 */
export function storageOpDelay(model: ClusterModel): void {
  const ms = model.storageOpMs ?? 500;
  if (ms > 0) sleepSync(ms);
}
