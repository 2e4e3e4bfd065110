import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { addressLeasesQuery, type AddressLease, type AddressPool, addressPoolWorkflowId } from '../../contract';

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
