import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AddressPoolSetting } from './addressRanges';

/**
 * The address pool entity workflows (workflows/addressPool.ts): one per pool, id
 * `address-pool-<name>`, owning the pool's leases. Temporal runs its updates one at a time
 * on one history, so two installs can never be handed the same address, and a lease
 * outlives any crash of a worker or the API.
 */

export const addressPoolWorkflowId = (pool: string): string => `address-pool-${pool}`;

/** One address handed out: to an install workflow (`owner`) for its VM. */
export interface AddressLease {
  address: string;
  owner: string;
  vmid?: number;
  /** ISO time the lease was made. */
  since: string;
}

export interface AddressPoolState {
  pool: string;
  leases: AddressLease[];
}

export interface AllocateAddress {
  /** The pool as the worker's ADDRESS_POOLS has it now: the workflow keeps no copy of the setting. */
  pool: AddressPoolSetting;
  owner: string;
  vmid?: number;
  /** One address asked for: it must be assignable in the pool and free. */
  address?: string;
}

/** Releases by owner, by VMID or by address: what the caller knows. */
export interface ReleaseAddress {
  owner?: string;
  vmid?: number;
  address?: string;
}

export const allocateAddressUpdate = defineUpdate<AddressLease, [AllocateAddress]>('allocate');
/** The leases released (none: nothing matched, which a retried release finds). */
export const releaseAddressUpdate = defineUpdate<AddressLease[], [ReleaseAddress]>('release');
export const addressLeasesQuery = defineQuery<AddressPoolState>('leases');

/** The static address an install's VM gets from a pool, with what its ipconfig0 and net0 need. */
export interface PoolAddress {
  pool: string;
  address: string;
  /** `ip=<address>/<prefix>,gw=<gateway>`. */
  ipconfig: string;
  bridge?: string;
  vlan?: number;
}
