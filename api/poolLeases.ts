import type { Client } from '@temporalio/client';
import type { AddressLease, AddressPool } from '../contract';
import { readLeases } from '../lib/addressPools/leases';
import { HttpError } from './errors';

/**
 * The pools' leases, as their workflows answer them, or a 502 naming `what` could not be
 * read: a route that needs them cannot answer without them.
 */
export async function readLeasesOr502(client: Client, pools: readonly Pick<AddressPool, 'name'>[], what: string): Promise<Map<string, AddressLease[]>> {
  try {
    return await readLeases(client, pools);
  } catch (err) {
    throw new HttpError(502, `could not read ${what}: ${(err as Error).message}`);
  }
}
