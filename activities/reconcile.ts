import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { creationTimeSec } from '../lib/proxmox/vmConfig';
import { readDisabledVmids } from '../lib/stateFiles';
import { addressLeasesQuery, addressPoolWorkflowId, generationOf, isAdoptionOwner, leaseVerdict, verdict, vmWorkflowId, type AddressLease, type LeaseItem, type OwnerState, type ReconcileItem } from '../contract';
import { WorkflowNotFoundError } from '@temporalio/client';
import { staticAddressOf } from '../lib/vm/address';
import { markerSealFor } from '../lib/vm/markerSeal';
import { describeUndecoded } from '../lib/temporal/workflowDescription';

export interface ReconcileDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** Activities of the reconciler (workflows/reconcile.ts). They read; removal is destroyOwnedVm's. */
export function reconcileActivities({ config, proxmox, client }: ReconcileDeps) {
  /**
   * How the run that wrote a VM's markers stands (describe, strongly consistent). That run,
   * not the newest under its id: anyone who reaches Temporal can start another run there.
   * Described raw, memo undecoded: the verdict needs its status, type and close time only,
   * and a memo sealed with a key this deployment lacks (dropped too early after a rotation)
   * must neither fail the survey nor pass for an owner the namespace does not know, which
   * would condemn a VM whose install completed.
   */
  async function ownerOfVm(workflowId: string, runId: string): Promise<{ state: OwnerState; type?: string; closedAtSec?: number }> {
    const d = await describeUndecoded(client, workflowId, runId);
    if (!d) return { state: 'UNKNOWN_TO_NAMESPACE' };
    const closedAtSec = d.closeTime ? Math.floor(d.closeTime.getTime() / 1000) : undefined;
    return { state: d.status as OwnerState, type: d.type, ...(closedAtSec !== undefined ? { closedAtSec } : {}) };
  }

  /**
   * The operation holding `vm-<vmid>`, if one runs. Raw too: one started with another key
   * holds the VM all the same (no operation of ours can start there while it runs).
   */
  async function busyWith(vmid: number): Promise<string | undefined> {
    const d = await describeUndecoded(client, vmWorkflowId(vmid));
    return d?.status === 'RUNNING' ? `${d.type} (workflow ${d.workflowId})` : undefined;
  }

  async function retentionSec(): Promise<number | undefined> {
    const ns = await client.workflowService.describeNamespace({ namespace: config.temporal.namespace });
    const ttl = ns.config?.workflowExecutionRetentionTtl?.seconds;
    return ttl === undefined || ttl === null ? undefined : Number(ttl);
  }

  /** How the latest run under a lease's owner id stands: a run started again there holds the lease as well. */
  async function ownerOfLease(workflowId: string): Promise<{ state?: OwnerState; unread?: string }> {
    try {
      const d = await describeUndecoded(client, workflowId);
      return { state: d ? (d.status as OwnerState) : 'UNKNOWN_TO_NAMESPACE' };
    } catch (err) {
      return { unread: (err as Error).message.split('\n')[0] };
    }
  }

  return {
    /**
     * Every lease of every pool with the reconciler's verdict. The owners are asked first and
     * the VMs read after: an install that closed before it was asked had created its VM by
     * then, so a lease is never taken from an install between its lease and its VM.
     */
    async planLeaseRelease(): Promise<LeaseItem[]> {
      const ctx = Context.current();
      const held: Array<{ pool: string; lease: AddressLease }> = [];
      for (const pool of config.addressPools) {
        try {
          const { leases } = await client.workflow.getHandle(addressPoolWorkflowId(pool.name)).query(addressLeasesQuery);
          held.push(...leases.map((lease) => ({ pool: pool.name, lease })));
        } catch (err) {
          if (!(err instanceof WorkflowNotFoundError)) throw err; // a pool never used has no leases
        }
      }
      const owners = new Map<string, { state?: OwnerState; unread?: string }>();
      for (const { lease } of held) {
        ctx.heartbeat(lease.address);
        if (!owners.has(lease.owner)) owners.set(lease.owner, await ownerOfLease(lease.owner));
      }
      const vms = new Map((await proxmox.vms()).map((vm) => [vm.vmid, vm.node]));
      const items: LeaseItem[] = [];
      for (const { pool, lease } of held) {
        ctx.heartbeat(lease.address);
        const owner = owners.get(lease.owner)!;
        let vm: { template: boolean; address?: string } | undefined;
        let vmUnread: string | undefined;
        const node = lease.vmid === undefined ? undefined : vms.get(lease.vmid);
        if (node !== undefined && lease.vmid !== undefined && owner.state !== 'RUNNING' && owner.unread === undefined) {
          const conf = await proxmox.requireNode(node).config(lease.vmid).catch((err: unknown) => err as Error);
          if (!(conf instanceof Error)) {
            const address = staticAddressOf(conf.entries.ipconfig0);
            vm = { template: conf.entries.template === '1', ...(address !== undefined ? { address } : {}) };
          } else if (conf.name !== 'VmNotFoundError') {
            // Its node unreachable: the VM may still use the address.
            vmUnread = `VM ${lease.vmid}'s config could not be read: ${conf.message.split('\n')[0]}`;
          }
        }
        const { action, reason } =
          vmUnread !== undefined
            ? { action: 'keep' as const, reason: vmUnread }
            : leaseVerdict({
                owner: lease.owner,
                ...(owner.state !== undefined ? { ownerState: owner.state } : {}),
                ...(owner.unread !== undefined ? { ownerUnread: owner.unread } : {}),
                ...(lease.vmid !== undefined ? { vmid: lease.vmid } : {}),
                address: lease.address,
                ...(vm ? { vm } : {}),
              });
        items.push({ pool, address: lease.address, generation: generationOf(lease), owner: lease.owner, ...(lease.vmid !== undefined ? { vmid: lease.vmid } : {}), action, reason });
      }
      return items;
    },

    /**
     * Every VM of the cluster with the reconciler's verdict. Only reads: the owner markers
     * and their seal (one `qm config` per VM, on its node), the owner run's state, the VM's creation time, the
     * namespace's retention. Heartbeats per VM, so a dead worker is noticed on a big cluster.
     */
    async planReconcile(): Promise<ReconcileItem[]> {
      const ctx = Context.current();
      const seal = markerSealFor(config);
      const vms = await proxmox.vms();
      const disabled = readDisabledVmids(config.dataDir);
      const retention = await retentionSec();
      const nowSec = Math.floor(Date.now() / 1000);
      const items: ReconcileItem[] = [];
      for (const vm of vms.sort((a, b) => a.vmid - b.vmid)) {
        ctx.heartbeat(vm.vmid);
        const conf = await proxmox.requireNode(vm.node).config(vm.vmid).catch((err: unknown) => err as Error);
        if (conf instanceof Error) {
          // Gone since the listing, or its node unreachable: nothing known, nothing done.
          items.push({ vmid: vm.vmid, node: vm.node, action: 'keep', reason: `its config could not be read: ${conf.message.split('\n')[0]}` });
          continue;
        }
        const markers = seal.check(conf, vm.vmid);
        const owner = markers.sealed ? markers.fields.owner : markers.owner;
        const untrusted = markers.sealed ? undefined : markers.reason;
        const adopted = markers.sealed && (isAdoptionOwner(markers.fields.owner) || markers.fields.adopted !== undefined);
        const found: { state: OwnerState; type?: string; closedAtSec?: number } | undefined = !markers.sealed
          ? undefined
          : adopted
            ? { state: 'ADOPTED' }
            : await ownerOfVm(markers.fields.owner, markers.fields.run);
        const state = found?.state;
        const busy = !markers.sealed || state === 'ADOPTED' ? undefined : await busyWith(vm.vmid);
        const { action, reason } = verdict(
          {
            vmid: vm.vmid,
            node: vm.node,
            name: conf.name,
            owner,
            ...(untrusted !== undefined ? { untrusted } : {}),
            ownerState: state,
            ownerType: found?.type,
            ownerClosedAtSec: found?.closedAtSec,
            createdAtSec: creationTimeSec(conf),
            retentionSec: retention,
            disabled: disabled.has(vm.vmid),
            busyWith: busy,
          },
          nowSec,
        );
        items.push({
          vmid: vm.vmid,
          node: vm.node,
          ...(conf.name ? { name: conf.name } : {}),
          ...(owner !== undefined ? { owner, ownerState: state } : {}),
          action,
          reason,
        });
      }
      return items;
    },
  };
}
