import type { Client, WorkflowHandle } from '@temporalio/client';
import { DEFAULT_USER, type FailureType, OS_VERSIONS, type OsName } from '../../contract';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/observability/log';
import type { ProxmoxCluster, ProxmoxNode } from '../../lib/proxmox';
import { readDisabledVmids } from '../../lib/stateFiles';
import { markerSealFor, notManagedRefusal } from '../../lib/vm/markerSeal';
import { vmAddress } from '../../lib/vm/address';
import { vmIp } from '../../lib/network';
import { vmInstanceOf } from '../../lib/proxmox/vmInstance';
import { HttpError, workflowFailure } from '../errors';
import { startVmOperation, type VmOperation } from './operation';
import { isTemplateVm, tenantOfVm } from '../tenancy';

/** What the API knows about a VM once its preconditions passed. */
export interface VmFacts {
  vmid: number;
  node: string;
  /** Its SMBIOS uuid (lib/proxmox/vmInstance.ts), when its config was read and has one. */
  instance?: string;
  /** `qm status` on its node: running, stopped, or a QMP state such as paused. */
  state: string;
  running: boolean;
  tags: string[];
}

/** What the VM's config says about it that the managed set needs. */
export type VmNotes = { description?: string; name?: string; entries?: Record<string, string> };

/** An operation to start on a VM: its workflow and arguments, and how the Temporal UI shows it. */
export type Operation = VmOperation & { operation: string; summary: string; node?: string; memo?: Record<string, string> };

export interface VmServiceDeps {
  config: Config;
  client: Client;
  proxmox: ProxmoxCluster;
  logger: Logger;
}

/**
 * The cluster reads and Temporal calls behind the VM routes. Every refusal is an HttpError
 * decided before any workflow starts: a disabled VMID 400, a VM the cluster does not know
 * 404, a VM outside the managed set 409, the wrong power state 400, another operation
 * holding the VM 409 (VmBusyError).
 */
export function vmService({ config, client, proxmox, logger }: VmServiceDeps) {
  const onNode = (node: string): ProxmoxNode => {
    const found = proxmox.node(node);
    if (!found) throw new HttpError(502, `VM is on node '${node}', which is not configured (NODE_${node})`);
    return found;
  };

  /** The VM's description, from `qm config` on its node. */
  async function notesOf(node: string, vmid: number): Promise<VmNotes> {
    try {
      return await onNode(node).config(vmid);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(502, `could not read the config of VM ${vmid} on ${node}: ${(err as Error).message}`);
    }
  }

  /** Where the VM is and whether it runs: one cluster query, then `qm status` on its node. */
  async function lookUp(vmid: number, opts: { config?: boolean } = {}): Promise<VmFacts & { conf?: VmNotes }> {
    let vm;
    try {
      vm = await proxmox.locateVm(vmid);
    } catch (err) {
      throw new HttpError(502, `could not read the cluster: ${(err as Error).message}`);
    }
    if (!vm) throw new HttpError(404, `VM ${vmid} does not exist`);
    const readState = async () => {
      try {
        return await onNode(vm.node).status(vmid);
      } catch (err) {
        if (err instanceof HttpError) throw err;
        throw new HttpError(502, `could not read the state of VM ${vmid} on ${vm.node}: ${(err as Error).message}`);
      }
    };
    // Side by side: each is a command on the node, and the answer has a deadline.
    const [state, conf] = await Promise.all([readState(), opts.config ? notesOf(vm.node, vmid) : undefined]);
    const instance = conf ? vmInstanceOf({ entries: conf.entries ?? {} }) : undefined;
    return { vmid, node: vm.node, ...(instance !== undefined ? { instance } : {}), state, running: state !== 'stopped', tags: vm.tags, conf };
  }

  /** The disabled list locks a VMID out of every mutating endpoint, whatever the body. */
  function refuseDisabled(vmid: number): void {
    if (readDisabledVmids(config.dataDir).has(vmid)) {
      throw new HttpError(400, `VM ${vmid} is on the disabled list and cannot be controlled through the API`);
    }
  }

  /** The managed set (docs/security.md): unless MANAGE_ALL_VMS, only VMs whose markers QemuRun sealed. */
  function refuseUnmanaged(vm: VmFacts & { conf?: VmNotes }): void {
    const refusal = notManagedRefusal(config, vm.vmid, vm.conf);
    if (refusal !== undefined) throw new HttpError(409, refusal, { type: 'NotManagedError' satisfies FailureType });
  }

  /**
   * Every command names the VM instance it is for (docs/security.md): a VM without an
   * SMBIOS uuid cannot be told from a later VM at its VMID, so no command is issued for it.
   */
  function requireInstance(vm: Pick<VmFacts, 'vmid' | 'instance'>): void {
    if (vm.instance !== undefined) return;
    throw new HttpError(
      409,
      `VM ${vm.vmid} has no SMBIOS uuid (smbios1), so a command cannot be bound to it; give it one in Proxmox (qm set ${vm.vmid} --smbios1 uuid=$(uuidgen))`,
      { type: 'VmInstanceError' satisfies FailureType },
    );
  }

  /**
   * Tenants (docs/security.md): another tenant's VM answers exactly as a VMID nobody uses
   * does, so a token learns nothing of other tenants' VMs. A sealed VM of no tenant is the
   * admin's. Unsealed VMs are the managed set's business (409, or MANAGE_ALL_VMS opens them).
   */
  async function hideOtherTenants(vm: VmFacts & { conf?: VmNotes }, scope: string): Promise<void> {
    const check = markerSealFor(config).check(vm.conf, vm.vmid);
    if (!check.sealed) return;
    const tenant = await tenantOfVm({ client, tokens: config.apiTokens }, vm.vmid, check);
    if (tenant !== scope) throw new HttpError(404, `VM ${vm.vmid} does not exist`);
  }

  /** A template is changed only by its build and the admin role (403: every reader lists templates anyway). */
  function refuseTemplate(vm: VmFacts & { conf?: VmNotes }): void {
    if (isTemplateVm(markerSealFor(config).check(vm.conf, vm.vmid), vm.conf?.entries)) {
      throw new HttpError(403, `VM ${vm.vmid} is a template: only its build workflow and the admin role change it`, { role: 'admin' });
    }
  }

  /**
   * The VM as the caller may see it (`scope`: the caller's tenant, undefined for every VM):
   * 404 for a missing VM and for another tenant's alike.
   */
  async function visible(vmid: number, scope: string | undefined): Promise<VmFacts & { conf?: VmNotes }> {
    const vm = await lookUp(vmid, { config: scope !== undefined });
    if (scope !== undefined) await hideOtherTenants(vm, scope);
    return vm;
  }

  return {
    lookUp,
    visible,
    requireInstance,

    /** For changes that check the rest themselves (a rebuild): not a template, not another tenant's. */
    async changeable(vmid: number, scope: string | undefined): Promise<void> {
      if (scope === undefined) return;
      const vm = await lookUp(vmid, { config: true });
      refuseTemplate(vm);
      await hideOtherTenants(vm, scope);
    },
    notesOf,
    refuseDisabled,

    /**
     * The VM exists, is in the managed set, is the caller's to change (`scope`: the caller's
     * tenant, undefined for admin), and is in the power state the operation needs.
     */
    async preconditions(vmid: number, needs: 'running' | 'stopped', scope?: string): Promise<VmFacts & { conf?: VmNotes }> {
      const vm = await lookUp(vmid, { config: true });
      refuseUnmanaged(vm);
      if (scope !== undefined) {
        refuseTemplate(vm);
        await hideOtherTenants(vm, scope);
      }
      // After the tenant check: another tenant's VM is a 404 whatever its config holds.
      requireInstance(vm);
      if (needs === 'stopped' && vm.running) throw new HttpError(400, 'VM is running', { state: vm.state });
      if (needs === 'running' && !vm.running) throw new HttpError(400, 'VM is not running', { state: vm.state });
      return vm;
    },

    /**
     * Where and as whom SSH readiness logs in: the VM's address (lib/vm/address.ts:
     * ipconfig0's static address, a pool's lease among them; the guest agent's for a DHCP VM,
     * undefined while it does not answer, and then the operation's workflow asks the agent
     * once the VM runs; else GATEWAY's /24 plus the VMID); the VM's cloud-init user, which
     * cloud-init made on first boot, else the OS default user from its OS tag (as the seed did).
     */
    async guest(vm: VmFacts): Promise<{ vmid: number; ip?: string; user: string }> {
      const node = onNode(vm.node);
      const conf = await node.config(vm.vmid).catch(() => undefined);
      const ip = conf ? await vmAddress(config.gateway, node, vm.vmid, conf) : vmIp(config.gateway, vm.vmid);
      const os = vm.tags.find((t): t is OsName => Object.hasOwn(OS_VERSIONS, t));
      const user = conf?.entries.ciuser ?? (os ? DEFAULT_USER[os] : 'root');
      return { vmid: vm.vmid, ...(ip !== undefined ? { ip } : {}), user };
    },

    start(vm: VmFacts, op: Operation): Promise<WorkflowHandle> {
      return startVmOperation({
        ...op,
        client,
        taskQueue: config.temporal.taskQueue,
        vmid: vm.vmid,
        node: op.node ?? vm.node,
        instance: vm.instance,
        logger,
      });
    },

    /** Waits for the operation's workflow; its failure becomes the HttpError of its type. */
    async finished(h: WorkflowHandle): Promise<void> {
      try {
        await h.result();
      } catch (err) {
        throw workflowFailure(err, { workflowId: h.workflowId });
      }
    },
  };
}

