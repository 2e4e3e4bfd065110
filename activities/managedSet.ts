import type { Config } from '../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../lib/proxmox';
import { failure, notManagedMessage } from '../contract';
import { markerSealFor, unmanagedReason } from '../lib/vm/markerSeal';

/**
 * The managed set, enforced where the commands run: every activity that changes an
 * existing VM calls this first, so a workflow started on Temporal directly (not through the
 * API, which checks too) cannot touch a VM QemuRun neither installed nor adopted. Only
 * sealed markers count (lib/vm/markerSeal.ts). Non-retryable NotManagedError; the API
 * answers it 409.
 */
export async function requireManaged(config: Config, node: ProxmoxNode, vmid: number): Promise<void> {
  if (config.manageAllVms) return;
  const conf = await node.config(vmid);
  const reason = unmanagedReason(markerSealFor(config).check(conf.description, vmid));
  if (reason !== undefined) throw failure('NotManagedError', notManagedMessage(vmid, conf.name, reason));
}

/** The node of a VM that exists (else VmNotFoundError) and is in the managed set. */
export async function managedNodeOf(config: Config, proxmox: ProxmoxCluster, vmid: number): Promise<ProxmoxNode> {
  const node = await proxmox.nodeOf(vmid);
  await requireManaged(config, node, vmid);
  return node;
}
