import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { type AddressPool, leaseHolderOf, tokenLeaseHolderOf } from '../contract';
import { heldBy } from '../lib/addressPools/leases';
import { readLeasesOr502 } from './poolLeases';
import { HttpError } from './errors';

/**
 * A 429 before anything starts when the tenant has all the leases its pool allows
 * (maxLeasesPerHolder), so no VM is made for an install that would fail at its lease. The
 * pool workflow counts again as it leases (installs racing past this check fail there).
 * `tenant`: the installing token's (undefined without tokens: one holder, `anonymous`).
 * Leases made before the quota counted by tenant name their token: those of the tenant's
 * tokens count too. `owner`: the install's workflow id, whose own lease (a repeat under its
 * Idempotency-Key) does not count against it.
 */
export async function checkLeaseQuota(config: Config, client: Client, poolName: string | undefined, tenant: string | undefined, owner: string): Promise<void> {
  const pool = (config.addressPools as readonly AddressPool[]).find((p) => p.name === poolName);
  if (!pool || pool.maxLeasesPerHolder === undefined) return;
  const leases = await readLeasesOr502(client, [pool], `address pool '${pool.name}''s leases`);
  const holder = leaseHolderOf(tenant);
  const before = tenant === undefined ? [] : config.apiTokens.filter((t) => t.tenant === tenant).map((t) => tokenLeaseHolderOf(t.name));
  const held = heldBy(leases.get(pool.name) ?? [], [holder, ...before], owner);
  if (held >= pool.maxLeasesPerHolder) {
    throw new HttpError(
      429,
      `addressPool: address pool '${pool.name}' allows ${pool.maxLeasesPerHolder} lease(s) per holder (maxLeasesPerHolder) and ${holder} holds ${held}: destroy a VM of the pool first`,
      { pool: pool.name, maxLeasesPerHolder: pool.maxLeasesPerHolder },
    );
  }
}
