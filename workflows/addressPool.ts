import { allHandlersFinished, condition, continueAsNew, currentUpdateInfo, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  addressLeasesQuery,
  type AddressLease,
  type AddressPoolState,
  allocateAddressUpdate,
  assignable,
  checkAddressPools,
  failure,
  firstFree,
  generationOf,
  ipToNumber,
  releaseAddressUpdate,
} from '../contract';

/** Updates a run takes before it continues as new, so its history stays short to replay. */
const UPDATES_PER_RUN = 500;
/** Answers kept by update id: more than a run takes, so a resent update is recognised across a hand-over. */
const ANSWERS_KEPT = 2 * UPDATES_PER_RUN;
/**
 * The patch that names each lease by a generation: a release names the lease it gives back
 * (address and generation), a resent update is answered from its first answer, and a pool
 * may cap the leases of one holder. Updates recorded before it replay as they ran.
 */
const LEASE_GENERATIONS = 'lease-generations';

/**
 * One address pool's leases, as a long-lived entity: the pool's allocations and releases
 * are this workflow's updates, which Temporal runs one at a time, so no two installs are
 * handed one address; the leases live in its history, so they outlive every crash. Started
 * by the first allocation (update-with-start, activities/addressPools.ts); never ends, but
 * continues as new with its leases when its history grows.
 */
export async function addressPool(state: AddressPoolState): Promise<void> {
  let leases: AddressLease[] = [...state.leases];
  let nextGeneration = state.nextGeneration ?? 1;
  const answered = new Map(state.answered ?? []);
  let updates = 0;

  setHandler(addressLeasesQuery, () => ({ pool: state.pool, leases }));

  /** The first answer to this update id, when it was sent before (Temporal dedups within a run only). */
  function answerOf<T extends AddressLease | AddressLease[]>(id: string | undefined): T | undefined {
    return id === undefined ? undefined : (answered.get(id) as T | undefined);
  }

  function remember<T extends AddressLease | AddressLease[]>(id: string | undefined, answer: T): T {
    if (id === undefined) return answer;
    answered.set(id, answer);
    while (answered.size > ANSWERS_KEPT) answered.delete(answered.keys().next().value as string);
    return answer;
  }

  setHandler(allocateAddressUpdate, ({ pool: setting, owner, vmid, address, holder }) => {
    updates++;
    const named = patched(LEASE_GENERATIONS);
    const updateId = named ? currentUpdateInfo()?.id : undefined;
    const before = answerOf<AddressLease>(updateId);
    if (before) return before;
    const { pools, problems } = checkAddressPools([setting]);
    if (problems.length > 0 || setting.name !== state.pool) throw failure('ConfigError', problems[0] ?? `pool '${setting.name}' is not ${state.pool}`);
    const pool = pools[0];
    // A retried allocation (the activity's reply was lost) gets what the first one got.
    const mine = leases.find((l) => l.owner === owner);
    if (mine && (address === undefined || mine.address === address)) {
      if (vmid !== undefined && mine.vmid !== vmid) leases = leases.map((l) => (l === mine ? { ...mine, vmid } : l));
      return remember(updateId, leases.find((l) => l.owner === owner)!);
    }
    if (mine) leases = leases.filter((l) => l !== mine);
    // A VM re-created under its VMID (a rebuild) asks for its own address by name: the lease
    // changes owner. Never without the address named: an install racing another for a
    // VMID must not take the lease the other holds for it.
    const ofVm = vmid === undefined || address === undefined ? undefined : leases.find((l) => l.vmid === vmid && l.address === address);
    if (ofVm) {
      // A new generation: a release of the lease as the VM's earlier install held it, sent
      // again, must not drop the re-created VM's.
      const lease = { ...ofVm, owner, ...(named ? { generation: nextGeneration++ } : {}) };
      leases = leases.map((l) => (l === ofVm ? lease : l));
      return remember(updateId, lease);
    }
    if (named && holder !== undefined && setting.maxLeasesPerHolder !== undefined) {
      const held = leases.filter((l) => l.holder === holder).length;
      if (held >= setting.maxLeasesPerHolder) {
        throw failure('AddressQuotaError', `address pool '${pool.name}' allows ${setting.maxLeasesPerHolder} lease(s) per holder (maxLeasesPerHolder) and ${holder} holds ${held}`);
      }
    }
    let chosen: string | undefined;
    if (address !== undefined) {
      if (!assignable(pool, ipToNumber(address))) {
        throw failure('InvalidRequestError', `ip: ${address} is not an address pool '${pool.name}' hands out (${pool.cidr}, gateway ${pool.gateway}, reserved ${(pool.reserved ?? []).join(', ') || 'none'})`);
      }
      const holding = leases.find((l) => l.address === address);
      if (holding) throw failure('AddressTakenError', `ip: ${address} is leased to ${holding.vmid !== undefined ? `VM ${holding.vmid}` : holding.owner}`);
      chosen = address;
    } else {
      chosen = firstFree(pool, new Set(leases.map((l) => l.address)));
      if (chosen === undefined) throw failure('AddressPoolExhaustedError', `address pool '${pool.name}' (${pool.cidr}) has no free address`);
    }
    const lease: AddressLease = {
      address: chosen,
      owner,
      ...(vmid !== undefined ? { vmid } : {}),
      since: new Date().toISOString(),
      ...(named ? { generation: nextGeneration++ } : {}),
      ...(named && holder !== undefined ? { holder } : {}),
    };
    leases = [...leases, lease];
    return remember(updateId, lease);
  });

  setHandler(releaseAddressUpdate, ({ owner, vmid, address, generation }) => {
    updates++;
    if (patched(LEASE_GENERATIONS)) {
      const updateId = currentUpdateInfo()?.id;
      const before = answerOf<AddressLease[]>(updateId);
      if (before) return before;
      // By owner or VMID a resent release would take whatever holds them now: a later
      // install's lease. Only the lease named goes.
      if (address === undefined || generation === undefined) throw failure('InvalidRequestError', 'release: name the lease (its address and generation)');
      const released = leases.filter((l) => l.address === address && generationOf(l) === generation);
      leases = leases.filter((l) => !released.includes(l));
      return remember(updateId, released);
    }
    const match = (l: AddressLease) =>
      (owner !== undefined && l.owner === owner) || (vmid !== undefined && l.vmid === vmid) || (address !== undefined && l.address === address);
    const released = leases.filter(match);
    leases = leases.filter((l) => !match(l));
    return released;
  });

  await condition(() => updates >= UPDATES_PER_RUN || workflowInfo().continueAsNewSuggested);
  // Updates accepted meanwhile finish in this run, so none is lost across the hand-over.
  await condition(allHandlersFinished);
  await continueAsNew<typeof addressPool>({
    pool: state.pool,
    leases,
    ...(state.nextGeneration !== undefined || nextGeneration > 1 ? { nextGeneration } : {}),
    ...(answered.size > 0 ? { answered: [...answered] } : {}),
  });
}
