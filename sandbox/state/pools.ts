import fs from 'node:fs';
import { clusterPaths } from './paths';
import type { ClusterModel } from './model';

/**
 * Resource pools (pve-access-control `user.cfg` `pool:` lines, pve-manager PVE/API2/Pool.pm):
 * which pools exist is the cluster's fixture (`pools` in cluster.json); which VMs belong to
 * one is kept as one file per member, so concurrent creates add themselves without a lock.
 * A pool's members are not in any VM's config: `qm config` never shows them.
 */

export function poolExists(model: ClusterModel, pool: string): boolean {
  return (model.pools ?? []).some((p) => p.poolid === pool);
}

/** `check_pool_exist` (RPCEnvironment.pm): `raise_perm_exc("pool '$pool' does not exist")`. */
export function poolMissingText(pool: string): string {
  return `Permission check failed (pool '${pool}' does not exist)`;
}

/** `add_vm_to_pool`, after create_vm wrote the config. */
export function addVmToPool(dir: string, pool: string, vmid: number): void {
  const poolDir = clusterPaths(dir).poolDir(pool);
  fs.mkdirSync(poolDir, { recursive: true });
  fs.writeFileSync(`${poolDir}/${vmid}`, '');
}

/** `remove_vm_access` (destroy with --purge): the VM leaves every pool. */
export function removeVmFromPools(dir: string, model: ClusterModel, vmid: number): void {
  for (const p of model.pools ?? []) fs.rmSync(`${clusterPaths(dir).poolDir(p.poolid)}/${vmid}`, { force: true });
}

/** The VMIDs of a pool's members, ascending. */
export function poolMembers(dir: string, pool: string): number[] {
  let names: string[] = [];
  try {
    names = fs.readdirSync(clusterPaths(dir).poolDir(pool));
  } catch {
    return [];
  }
  return names.filter((n) => /^\d+$/.test(n)).map(Number).sort((a, b) => a - b);
}

/** The pool a VM belongs to, as `/cluster/resources` shows it. */
export function poolOf(dir: string, model: ClusterModel, vmid: number): string | undefined {
  return (model.pools ?? []).find((p) => fs.existsSync(`${clusterPaths(dir).poolDir(p.poolid)}/${vmid}`))?.poolid;
}
