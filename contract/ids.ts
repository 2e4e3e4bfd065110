/**
 * Names the product derives from a VMID, shared by the API that starts workflows, the
 * workflows that start children and the activities that look runs up.
 */

/**
 * Every per-VM operation (start, stop, destroy, rebuild, ...) runs under this workflow id
 * with `workflowIdConflictPolicy: 'FAIL'`, so two operations on one VM never run at once.
 */
export function vmWorkflowId(vmid: number): string {
  return `vm-${vmid}`;
}

/** A VM's name in Proxmox: the requested prefix (the VMID when none) and the VMID. */
export function vmName(prefix: string | undefined, vmid: number): string {
  return `${prefix ?? vmid}-${vmid}`;
}

/** The install a rebuild starts as its child: one per rebuild run. */
export function rebuildInstallWorkflowId(rebuildWorkflowId: string, rebuildRunId: string): string {
  return `${rebuildWorkflowId}-install-${rebuildRunId.slice(0, 8)}`;
}

/** The schedule id used when a rebuild schedule is created without one: `rebuild-vm-<vmid>`. */
export function rebuildScheduleId(vmid: number): string {
  return `${REBUILD_SCHEDULE_PREFIX}${vmid}`;
}

export const REBUILD_SCHEDULE_PREFIX = 'rebuild-vm-';

/**
 * The memo key naming the API token that started a workflow: the operate role cancels its
 * own work by it, and a pool's quota counts leases by it (leaseHolderOf).
 */
export const STARTED_BY_MEMO = 'startedBy';
