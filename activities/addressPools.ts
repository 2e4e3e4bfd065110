import { type Client, WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import {
  type AddressLease,
  type AddressPool,
  type AddressPoolSetting,
  type AddressPoolState,
  addressPoolWorkflowId,
  allocateAddressUpdate,
  failure,
  type PoolAddress,
  ipconfigOf,
  releaseAddressUpdate,
} from '../contract';

export interface AddressPoolDeps {
  config: Config;
  client: Client;
}

/** The setting as the pool workflow takes it: the arithmetic's numbers stay behind. */
function settingOf(pool: AddressPool): AddressPoolSetting {
  const { name, cidr, gateway, bridge, vlan, reserved } = pool;
  return { name, cidr, gateway, ...(bridge !== undefined ? { bridge } : {}), ...(vlan !== undefined ? { vlan } : {}), ...(reserved ? { reserved: [...reserved] } : {}) };
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

  return {
    /**
     * A lease for this install (its workflow id, `owner`): update-with-start, so the pool's
     * workflow is started by its first allocation. Idempotent per owner.
     */
    async allocateAddress(input: { pool: string; owner: string; vmid?: number; address?: string }): Promise<PoolAddress> {
      const pool = poolNamed(input.pool);
      const start = new WithStartWorkflowOperation('addressPool', {
        workflowId: addressPoolWorkflowId(pool.name),
        taskQueue: config.temporal.taskQueue,
        args: [{ pool: pool.name, leases: [] } satisfies AddressPoolState],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      let lease: AddressLease;
      try {
        lease = await client.workflow.executeUpdateWithStart(allocateAddressUpdate, {
          args: [{ pool: settingOf(pool), owner: input.owner, ...(input.vmid !== undefined ? { vmid: input.vmid } : {}), ...(input.address !== undefined ? { address: input.address } : {}) }],
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
    },

    /** Gives back what an owner or a VMID holds, in every configured pool; nothing held is done. */
    async releaseAddress(input: { owner?: string; vmid?: number }): Promise<string[]> {
      const released: string[] = [];
      for (const pool of config.addressPools) {
        try {
          const leases = await client.workflow.getHandle(addressPoolWorkflowId(pool.name)).executeUpdate(releaseAddressUpdate, { args: [input] });
          released.push(...leases.map((l) => l.address));
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) continue; // the pool never handed out anything
          throw unwrapUpdate(err);
        }
      }
      return released;
    },
  };
}
