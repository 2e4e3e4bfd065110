import { type Client, WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import { releaseNamedLease } from '../lib/addressPools/leases';
import {
  type AddressLease,
  type AddressPool,
  type AddressPoolSetting,
  type AddressPoolState,
  addressLeasesQuery,
  addressPoolWorkflowId,
  allocateAddressUpdate,
  failure,
  leaseHolderOf,
  type PoolAddress,
  ipconfigOf,
  STARTED_BY_MEMO,
} from '../contract';

export interface AddressPoolDeps {
  config: Config;
  client: Client;
}

/** The setting as the pool workflow takes it: the arithmetic's numbers stay behind. */
function settingOf(pool: AddressPool): AddressPoolSetting {
  const { name, cidr, gateway, bridge, vlan, reserved, maxLeasesPerHolder } = pool;
  return {
    name,
    cidr,
    gateway,
    ...(bridge !== undefined ? { bridge } : {}),
    ...(vlan !== undefined ? { vlan } : {}),
    ...(reserved ? { reserved: [...reserved] } : {}),
    ...(maxLeasesPerHolder !== undefined ? { maxLeasesPerHolder } : {}),
  };
}

/** An update's own failure (the pool is full, the address taken), not Temporal's wrapper. */
function unwrapUpdate(err: unknown): unknown {
  return err instanceof WorkflowUpdateFailedError && err.cause ? err.cause : err;
}

/**
 * Leases from the pool workflows (workflows/addressPool.ts). The worker checks the pool
 * against its own ADDRESS_POOLS again: the API's check may have been made with another
 * setting.
 */
export function addressPoolActivities({ config, client }: AddressPoolDeps) {
  const poolNamed = (name: string): AddressPool => {
    const pool = config.addressPools.find((p) => p.name === name);
    if (!pool) throw failure('InvalidRequestError', `addressPool: no address pool named '${name}' (ADDRESS_POOLS names ${config.addressPools.map((p) => p.name).join(', ') || 'none'})`);
    return pool as AddressPool;
  };

  /**
   * The tenant the owner workflow installs for, as the quota counts it: the spec in its
   * `request` memo names it (an install's, and a rebuild's, whose spec keeps the VM's tenant,
   * scheduled or not); else the tenant of the token that started it (its startedBy memo, mapped
   * through the tokens file; a token not listed there is its own tenant); unknown: anonymous.
   */
  const holderOf = async (owner: string): Promise<string> => {
    const memo = await client.workflow
      .getHandle(owner)
      .describe()
      .then((d) => d.memo)
      .catch(() => undefined);
    const request = memo?.request as { tenant?: unknown } | undefined;
    if (typeof request?.tenant === 'string') return leaseHolderOf(request.tenant);
    const startedBy = memo?.[STARTED_BY_MEMO];
    if (typeof startedBy !== 'string') return leaseHolderOf(undefined);
    return leaseHolderOf(config.apiTokens.find((t) => t.name === startedBy)?.tenant ?? startedBy);
  };

  const releaseNamed = (pool: string, lease: Pick<AddressLease, 'address' | 'generation'>) => releaseNamedLease(client, pool, lease);

  const leasesOf = async (pool: string): Promise<AddressLease[]> => {
    try {
      return (await client.workflow.getHandle(addressPoolWorkflowId(pool)).query(addressLeasesQuery)).leases;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return []; // the pool never handed out anything
      throw err;
    }
  };

  /**
   * A lease for this install (its workflow id, `owner`): update-with-start, so the pool's
   * workflow is started by its first allocation. Idempotent per owner.
   */
  const allocateAddress = async (input: { pool: string; owner: string; vmid?: number; address?: string }): Promise<PoolAddress> => {
      const pool = poolNamed(input.pool);
      const holder = await holderOf(input.owner);
      const start = new WithStartWorkflowOperation('addressPool', {
        workflowId: addressPoolWorkflowId(pool.name),
        taskQueue: config.temporal.taskQueue,
        args: [{ pool: pool.name, leases: [] } satisfies AddressPoolState],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      let lease: AddressLease;
      try {
        lease = await client.workflow.executeUpdateWithStart(allocateAddressUpdate, {
          args: [{ pool: settingOf(pool), owner: input.owner, ...(input.vmid !== undefined ? { vmid: input.vmid } : {}), ...(input.address !== undefined ? { address: input.address } : {}), holder }],
          startWorkflowOperation: start,
        });
      } catch (err) {
        throw unwrapUpdate(err);
      }
      return {
        pool: pool.name,
        address: lease.address,
        ipconfig: ipconfigOf(lease.address, pool),
        ...(pool.bridge !== undefined ? { bridge: pool.bridge } : {}),
        ...(pool.vlan !== undefined ? { vlan: pool.vlan } : {}),
      };
  };

  return {
    allocateAddress,

    /**
     * Gives back what an owner or a VMID holds, in every configured pool; nothing held is
     * done. Each lease found is released by name: one made meanwhile (another generation)
     * stays.
     */
    async releaseAddress(input: { owner?: string; vmid?: number }): Promise<string[]> {
      const released: string[] = [];
      for (const pool of config.addressPools) {
        const held = (await leasesOf(pool.name)).filter((l) => (input.owner !== undefined && l.owner === input.owner) || (input.vmid !== undefined && l.vmid === input.vmid));
        for (const lease of held) released.push(...(await releaseNamed(pool.name, lease)).map((l) => l.address));
      }
      return released;
    },

    /** Gives back one lease, named by its pool, address and generation (the reconciler's). */
    async releaseLease(input: { pool: string; address: string; generation: number }): Promise<string[]> {
      return (await releaseNamed(input.pool, input)).map((l) => l.address);
    },

    /**
     * A template build's address with pools set: a lease from the first pool, as an install
     * naming no pool gets, so no install is handed the address while the build's VM lives.
     * Without pools: none (the build's address is GATEWAY's /24 plus its VMID, as before).
     */
    async leaseBuildAddress(input: { owner: string; vmid: number }): Promise<PoolAddress | null> {
      const first = config.addressPools[0];
      if (!first) return null;
      return allocateAddress({ pool: first.name, owner: input.owner, vmid: input.vmid });
    },
  };
}
