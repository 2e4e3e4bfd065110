import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { failure } from '../contract';
import { markerSealFor } from '../lib/vm/markerSeal';
import { knownNode, managedNodeOf, requireInstance } from './managedSet';
import { BridgeNotFoundError } from '../lib/proxmox/errors';

export interface PowerDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * Starting, rebooting, shutting down and stopping a VM, on the node it lives on now. A VM
 * already in the state asked for counts as done, so a retry is harmless.
 */
export function powerActivities({ config, proxmox }: PowerDeps) {
  const managedNode = (vmid: number, known?: string, instance?: string) => managedNodeOf(config, proxmox, vmid, known, instance);
  /**
   * A start whose missing bridge is not VM_BRIDGE: the VM's bridge came from its install's
   * request (or its own net0), so the hint names that instead of the setting.
   */
  const start = async (node: Awaited<ReturnType<typeof managedNode>>, vmid: number) => {
    try {
      await node.start(vmid);
    } catch (err) {
      if (err instanceof BridgeNotFoundError && err.bridge !== undefined && err.bridge !== config.bridge) throw err.fromRequest();
      throw err;
    }
  };

  return {
    async startVm(input: { vmid: number; node?: string; instance?: string }): Promise<void> {
      const node = await managedNode(input.vmid, knownNode(input, 'startVm'), input.instance);
      if ((await node.status(input.vmid)) === 'running') return;
      await start(node, input.vmid);
    },

    async rebootVm(input: { vmid: number; node?: string; instance?: string }): Promise<void> {
      const node = await managedNode(input.vmid, knownNode(input, 'rebootVm'), input.instance);
      if ((await node.status(input.vmid)) !== 'running') {
        await start(node, input.vmid);
        return;
      }
      await node.reboot(input.vmid);
    },

    /** `qm shutdown` (ACPI, qm's 60 s timeout). A stopped VM is done already. */
    async shutdownVm(input: { vmid: number; instance?: string }): Promise<void> {
      const node = await managedNode(input.vmid, undefined, input.instance);
      if ((await node.status(input.vmid)) === 'stopped') return;
      await node.shutdown(input.vmid);
    },

    /** `qm stop`: immediate; qm itself treats a stopped VM as done. */
    async stopVm(input: { vmid: number; instance?: string }): Promise<void> {
      await (await managedNode(input.vmid, undefined, input.instance)).stop(input.vmid);
    },

    /**
     * Force-stops a VM carrying this owner marker (a rebuild throws the guest away, so there is
     * no point in an ACPI shutdown). A lock held by a backup or migration is respected: the
     * stop retries and, failing that, the rebuild stops before destroying anything.
     */
    async stopOwnedVm(input: { vmid: number; owner: string; run?: string; instance?: string }): Promise<boolean> {
      const found = await proxmox.locateGuest(input.vmid);
      if (!found) return false;
      const node = proxmox.requireNode(found.node);
      const conf = await node.config(input.vmid);
      requireInstance(input.vmid, conf, input.instance);
      const check = markerSealFor(config).check(conf, input.vmid);
      if (!check.sealed || check.fields.owner !== input.owner || (input.run !== undefined && check.fields.run !== input.run)) {
        throw failure('NotOwnedError', `VM ${input.vmid} is no longer owned by ${input.owner}; refusing to stop it`);
      }
      if ((await node.status(input.vmid)) === 'stopped') return false;
      await node.stop(input.vmid);
      return true;
    },
  };
}
