import { type Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { addressLeasesQuery, type AddressLease, type AddressPool, addressPoolWorkflowId, generationOf, releaseAddressUpdate, releaseUpdateId } from '../../contract';

/** The leases of every configured pool, for the API's listings; a pool never used has none. */
export async function readLeases(client: Client, pools: readonly Pick<AddressPool, 'name'>[]): Promise<Map<string, AddressLease[]>> {
  const out = new Map<string, AddressLease[]>();
  await Promise.all(
    pools.map(async (p) => {
      try {
        out.set(p.name, (await client.workflow.getHandle(addressPoolWorkflowId(p.name)).query(addressLeasesQuery)).leases);
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        out.set(p.name, []);
      }
    }),
  );
  return out;
}

/**
 * Gives back one lease, named by address and generation, under the update id of that
 * release: sent again (a retry, a replay), it releases nothing more. Released: the lease; none:
 * another lease holds the address now, or the pool never handed out anything.
 */
export async function releaseNamedLease(client: Client, pool: string, lease: Pick<AddressLease, 'address' | 'generation'>): Promise<AddressLease[]> {
  try {
    return await client.workflow.getHandle(addressPoolWorkflowId(pool)).executeUpdate(releaseAddressUpdate, {
      args: [{ address: lease.address, generation: generationOf(lease) }],
      updateId: releaseUpdateId(pool, lease),
    });
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return [];
    throw err instanceof WorkflowUpdateFailedError && err.cause ? err.cause : err;
  }
}

/**
 * How many leases of the pool the holder has (leaseHolderOf, and any other names it held them
 * under), leaving out the one `owner` holds already.
 */
export function heldBy(leases: readonly AddressLease[], holder: string | readonly string[], owner?: string): number {
  const names = typeof holder === 'string' ? [holder] : holder;
  return leases.filter((l) => l.holder !== undefined && names.includes(l.holder) && l.owner !== owner).length;
}
