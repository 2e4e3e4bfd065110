import { allHandlersFinished, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  addressLeasesQuery,
  type AddressLease,
  type AddressPoolState,
  allocateAddressUpdate,
  assignable,
  checkAddressPools,
  failure,
  firstFree,
  ipToNumber,
  releaseAddressUpdate,
} from '../contract';

/** Updates a run takes before it continues as new, so its history stays short to replay. */
const UPDATES_PER_RUN = 500;

/**
 * One address pool's leases, as a long-lived entity: the pool's allocations and releases
 * are this workflow's updates, which Temporal runs one at a time, so no two installs are
 * handed one address; the leases live in its history, so they outlive every crash. Started
 * by the first allocation (update-with-start, activities/addressPools.ts); never ends, but
 * continues as new with its leases when its history grows.
 */
export async function addressPool(state: AddressPoolState): Promise<void> {
  let leases: AddressLease[] = [...state.leases];
  let updates = 0;

  setHandler(addressLeasesQuery, () => ({ pool: state.pool, leases }));

  setHandler(allocateAddressUpdate, ({ pool: setting, owner, vmid, address }) => {
    updates++;
    const { pools, problems } = checkAddressPools([setting]);
    if (problems.length > 0 || setting.name !== state.pool) throw failure('ConfigError', problems[0] ?? `pool '${setting.name}' is not ${state.pool}`);
    const pool = pools[0];
    // A retried allocation (the activity's reply was lost) gets what the first one got.
    const mine = leases.find((l) => l.owner === owner);
    if (mine && (address === undefined || mine.address === address)) {
      if (vmid !== undefined && mine.vmid !== vmid) leases = leases.map((l) => (l === mine ? { ...mine, vmid } : l));
      return leases.find((l) => l.owner === owner)!;
    }
    if (mine) leases = leases.filter((l) => l !== mine);
    // A VM re-created under its VMID (a rebuild) asks for its own address by name: the lease
    // changes owner. Never without the address named: an install racing another for a
    // VMID must not take the lease the other holds for it.
    const ofVm = vmid === undefined || address === undefined ? undefined : leases.find((l) => l.vmid === vmid && l.address === address);
    if (ofVm) {
      const lease = { ...ofVm, owner };
      leases = leases.map((l) => (l === ofVm ? lease : l));
      return lease;
    }
    let chosen: string | undefined;
    if (address !== undefined) {
      if (!assignable(pool, ipToNumber(address))) {
        throw failure('InvalidRequestError', `ip: ${address} is not an address pool '${pool.name}' hands out (${pool.cidr}, gateway ${pool.gateway}, reserved ${(pool.reserved ?? []).join(', ') || 'none'})`);
      }
      const holder = leases.find((l) => l.address === address);
      if (holder) throw failure('AddressTakenError', `ip: ${address} is leased to ${holder.vmid !== undefined ? `VM ${holder.vmid}` : holder.owner}`);
      chosen = address;
    } else {
      chosen = firstFree(pool, new Set(leases.map((l) => l.address)));
      if (chosen === undefined) throw failure('AddressPoolExhaustedError', `address pool '${pool.name}' (${pool.cidr}) has no free address`);
    }
    const lease: AddressLease = { address: chosen, owner, ...(vmid !== undefined ? { vmid } : {}), since: new Date().toISOString() };
    leases = [...leases, lease];
    return lease;
  });

  setHandler(releaseAddressUpdate, ({ owner, vmid, address }) => {
    updates++;
    const match = (l: AddressLease) =>
      (owner !== undefined && l.owner === owner) || (vmid !== undefined && l.vmid === vmid) || (address !== undefined && l.address === address);
    const released = leases.filter(match);
    leases = leases.filter((l) => !match(l));
    return released;
  });

  await condition(() => updates >= UPDATES_PER_RUN || workflowInfo().continueAsNewSuggested);
  // Updates accepted meanwhile finish in this run, so none is lost across the hand-over.
  await condition(allHandlersFinished);
  await continueAsNew<typeof addressPool>({ pool: state.pool, leases });
}
