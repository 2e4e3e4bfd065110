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
  /**
   * Which lease this is: the pool numbers every lease it makes from 1, so a release naming
   * an earlier one cannot drop this one. Absent on leases made before generations: 0 (generationOf).
   */
  generation?: number;
  /** Who the quota counts the lease against (leaseHolderOf); absent on leases made before quotas. */
  holder?: string;
}

export interface AddressPoolState {
  pool: string;
  leases: AddressLease[];
  /** The generation the next lease gets. */
  nextGeneration?: number;
  /** The last updates' ids with their answers, so one sent again (even after continue-as-new) acts once. */
  answered?: Array<[string, AddressLease | AddressLease[]]>;
}

export interface AllocateAddress {
  /** The pool as the worker's ADDRESS_POOLS has it now: the workflow keeps no copy of the setting. */
  pool: AddressPoolSetting;
  owner: string;
  vmid?: number;
  /** One address asked for: it must be assignable in the pool and free. */
  address?: string;
  /** Who the pool's maxLeasesPerHolder counts the lease against (leaseHolderOf). */
  holder?: string;
}

/**
 * Releases one lease, named by its address and generation: a release sent again after the
 * address was leased anew finds another generation there and releases nothing. (Histories
 * recorded before generations hold releases by owner or VMID; they replay as they ran.)
 */
export interface ReleaseAddress {
  owner?: string;
  vmid?: number;
  address?: string;
  generation?: number;
}

/**
 * The identity a pool's quota counts leases against: the tenant the install is for (the
 * installing token's, lib/apiTokens.ts: a token whose line names no `tenant=` is a tenant of
 * its own, named after it), or `anonymous` without tokens. So tokens that share a tenant share
 * its quota, as they share its VMs.
 */
export function leaseHolderOf(tenant: string | undefined): string {
  return tenant === undefined || tenant === '' ? 'anonymous' : `tenant:${tenant}`;
}

/** The holder a lease made before quotas counted by tenant names: the token that started its install. */
export function tokenLeaseHolderOf(token: string): string {
  return `token:${token}`;
}

/** A lease's generation; leases made before generations are generation 0. */
export const generationOf = (lease: Pick<AddressLease, 'generation'>): number => lease.generation ?? 0;

/** The update id of the release of one lease: the same lease's release is one update, however often it is sent. */
export const releaseUpdateId = (pool: string, lease: Pick<AddressLease, 'address' | 'generation'>): string =>
  `release-${pool}-${lease.address}-${generationOf(lease)}`;

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
