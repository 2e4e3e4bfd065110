import type { Config } from '../lib/config';
import { onVmNode, type ProxmoxCluster, type ProxmoxNode } from '../lib/proxmox';
import type { VmConfig } from '../lib/proxmox/vmConfig';
import { failure, field, checkedInput } from '../contract';
import { notManagedRefusal } from '../lib/vm/markerSeal';

/**
 * The managed set, enforced where the commands run: every activity that changes an
 * existing VM calls this first, so a workflow started on Temporal directly (not through the
 * API, which checks too) cannot touch a VM QemuRun neither installed nor adopted. Only
 * sealed markers count (lib/vm/markerSeal.ts). Non-retryable NotManagedError; the API
 * answers it 409.
 */
export async function requireManaged(config: Config, node: ProxmoxNode, vmid: number): Promise<void> {
  if (config.manageAllVms) return;
  requireManagedConfig(config, vmid, await node.config(vmid));
}

/** The managed set's check on a config read already. */
export function requireManagedConfig(config: Config, vmid: number, conf: VmConfig): void {
  if (config.manageAllVms) return;
  const refusal = notManagedRefusal(config, vmid, conf);
  if (refusal !== undefined) throw failure('NotManagedError', refusal);
}

/**
 * The node of a VM that exists (else VmNotFoundError) and is in the managed set. `known`:
 * where the workflow made the VM or last moved it. The VM's config read there, which the
 * managed check needs anyway, says it is still there, so only a VM moved since costs a read
 * of the cluster's resources.
 */
export async function managedNodeOf(config: Config, proxmox: ProxmoxCluster, vmid: number, known?: string): Promise<ProxmoxNode> {
  if (known === undefined) {
    const node = await proxmox.nodeOf(vmid);
    await requireManaged(config, node, vmid);
    return node;
  }
  return onVmNode(proxmox, vmid, known, async (node) => {
    requireManagedConfig(config, vmid, await node.config(vmid));
    return node;
  });
}

/**
 * The node an activity's input says a VM is on (absent in inputs of earlier versions),
 * checked with the API's rules: in API mode it becomes part of a request path.
 */
export function knownNode(input: { node?: string }, activity: string): string | undefined {
  return input.node === undefined ? undefined : checkedInput(field.node, input.node, activity);
}
