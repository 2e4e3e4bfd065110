import type { Config } from '../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../lib/proxmox';
import { failure } from '../contract';
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
  const refusal = notManagedRefusal(config, vmid, await node.config(vmid));
  if (refusal !== undefined) throw failure('NotManagedError', refusal);
}

/** The node of a VM that exists (else VmNotFoundError) and is in the managed set. */
export async function managedNodeOf(config: Config, proxmox: ProxmoxCluster, vmid: number): Promise<ProxmoxNode> {
  const node = await proxmox.nodeOf(vmid);
  await requireManaged(config, node, vmid);
  return node;
}
