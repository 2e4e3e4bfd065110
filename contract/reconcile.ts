/**
 * The reconciler's verdicts: which VMs a closed or vanished install left behind. Shared by
 * the workflow (types only), its activities and the API; free of Node.js imports.
 */

/** How the workflow named in a VM's owner marker stands in the namespace. */
export type OwnerState =
  | 'RUNNING'
  | 'COMPLETED'
  | 'FAILED'
  | 'CANCELLED'
  | 'TERMINATED'
  | 'TIMED_OUT'
  | 'CONTINUED_AS_NEW'
  | 'UNKNOWN_TO_NAMESPACE'
  /** An adopted VM: its owner names an adoption, not a workflow. */
  | 'ADOPTED';

/** Closed without leaving a finished VM: its compensation was skipped (terminate) or may have failed. */
const ABANDONED_STATES: readonly OwnerState[] = ['FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT'];

/** What the reconciler knows of one VM before deciding. */
export interface ReconcileFacts {
  vmid: number;
  node: string;
  name?: string;
  /** The workflow id in the VM's qemurun-owner marker; undefined without one. */
  owner?: string;
  /** Why the markers are not trusted (no seal, a wrong one); undefined when they are sealed. */
  untrusted?: string;
  ownerState?: OwnerState;
  /** The owner's workflow type, when the namespace knows it: only an install builds VMs. */
  ownerType?: string;
  /** When the owner run closed, epoch seconds, when it has. */
  ownerClosedAtSec?: number;
  /** When Proxmox created the VM (`meta: ctime=`), epoch seconds. */
  createdAtSec?: number;
  /** The namespace's retention: how long a closed workflow stays known. */
  retentionSec?: number;
  disabled: boolean;
  /** The operation holding `vm-<vmid>` now, if any (a destroy, a start, ...). */
  busyWith?: string;
}

export type ReconcileAction = 'remove' | 'keep';

export interface ReconcileVerdict {
  action: ReconcileAction;
  reason: string;
}

/** One VM in a reconciler's answer: what it found, and what it did or (dry run) would do. */
export interface ReconcileItem {
  vmid: number;
  node: string;
  name?: string;
  owner?: string;
  ownerState?: OwnerState;
  /** keep: left alone; remove: to be removed (the plan and a dry run); removed, gone, failed: what a run did. */
  action: ReconcileAction | 'removed' | 'gone' | 'failed';
  reason: string;
}

export interface ReconcileInput {
  /** Decide and report only; change nothing. */
  dryRun?: boolean;
}

export interface ReconcileResult {
  dryRun: boolean;
  /** Every VM of the cluster, by VMID. */
  vms: ReconcileItem[];
  removed: number[];
  failed: number[];
  /** Every address lease of the pools, with what was done (runs and histories before lease release: absent). */
  leases?: LeaseItem[];
  /** The addresses released. */
  released?: string[];
}

/**
 * The rule: remove a VM only when it carries sealed owner markers and its owner run closed without
 * finishing (failed, terminated, timed out, cancelled) or is unknown to the namespace while
 * the namespace would still remember it. Everything else is kept, with the reason.
 */
export function verdict(f: ReconcileFacts, nowSec: number): ReconcileVerdict {
  if (f.owner === undefined) return keep('no qemurun-owner marker: not a VM QemuRun manages');
  if (f.disabled) return keep('listed in the disabled list');
  // Anyone who can edit a VM's Notes can write markers: only sealed ones condemn a VM.
  if (f.untrusted !== undefined) return keep(`its qemurun-owner marker is not trusted: ${f.untrusted}`);
  const state = f.ownerState;
  if (state === 'ADOPTED') return keep(`adopted into the managed set (${f.owner}), not built by a workflow`);
  if (f.busyWith) return keep(`busy: ${f.busyWith} is running on it`);
  // A template build makes a VM as an install does, and leaves one half-built as an install does.
  if (f.ownerType !== undefined && f.ownerType !== 'installVm' && f.ownerType !== 'buildTemplate') {
    return keep(`its owner ${f.owner} is a ${f.ownerType} workflow, not an install or a template build`);
  }
  if (state === 'RUNNING' || state === 'CONTINUED_AS_NEW') return keep(`its owner ${f.owner} is running`);
  if (state === 'COMPLETED') return keep(`its owner ${f.owner} completed`);
  if (state && ABANDONED_STATES.includes(state)) {
    // Its owner cannot have built a VM Proxmox created after the run had closed: these are
    // markers copied from an earlier VM of the same VMID.
    if (f.createdAtSec !== undefined && f.ownerClosedAtSec !== undefined && f.createdAtSec > f.ownerClosedAtSec + CLOCK_SLACK_SEC) {
      return keep(`its owner ${f.owner} closed before the VM was created: the markers are not that run's`);
    }
    return remove(`its owner ${f.owner} closed as ${state.toLowerCase().replace('_', ' ')}`);
  }
  if (state === 'UNKNOWN_TO_NAMESPACE') {
    // A closed workflow is forgotten once the retention passes: past that, "unknown" says
    // nothing, and every older VM would look abandoned.
    if (f.createdAtSec === undefined || f.retentionSec === undefined) {
      return keep(`its owner ${f.owner} is unknown to the namespace, but the VM's creation time or the retention is unknown`);
    }
    const ageSec = nowSec - f.createdAtSec;
    if (ageSec >= f.retentionSec) {
      return keep(`its owner ${f.owner} is unknown to the namespace, but the VM is older than the namespace's retention (${hours(f.retentionSec)}): its history may simply have expired`);
    }
    return remove(`its owner ${f.owner} is unknown to the namespace, and the VM is younger than the namespace's retention (${hours(f.retentionSec)})`);
  }
  return keep(`its owner ${f.owner} is in an unexpected state (${state ?? 'unread'})`);
}

/** Proxmox's clock and Temporal's need not agree to the second. */
const CLOCK_SLACK_SEC = 60;

function keep(reason: string): ReconcileVerdict {
  return { action: 'keep', reason };
}

function remove(reason: string): ReconcileVerdict {
  return { action: 'remove', reason };
}

function hours(sec: number): string {
  return sec % 86400 === 0 ? `${sec / 86400}d` : `${Math.round(sec / 360) / 10}h`;
}

/** The schedule a service creates for its task queue (one reconciler per cluster and queue). */
export function reconcileScheduleId(taskQueue: string): string {
  return `${taskQueue}-reconcile`;
}

/** An owner in these states runs no more: it will create no VM on its lease. */
const OWNER_GONE_STATES: readonly OwnerState[] = ['COMPLETED', ...ABANDONED_STATES, 'UNKNOWN_TO_NAMESPACE'];

/** What the reconciler knows of one address lease before deciding (planLeaseRelease). */
export interface LeaseFacts {
  owner: string;
  /** How the lease's owner (an install or a template build) stands; asked before the VM is read. */
  ownerState?: OwnerState;
  /** Why the owner could not be asked, when it could not. */
  ownerUnread?: string;
  vmid?: number;
  address: string;
  /** The VM at the lease's VMID, read after its owner: absent when there is none. */
  vm?: { template: boolean; address?: string };
}

/** One address lease in a reconciler's answer. */
export interface LeaseItem {
  pool: string;
  address: string;
  generation: number;
  owner: string;
  vmid?: number;
  /** keep: left alone; release: to be released (the plan, a dry run); released, gone, failed: what a run did. */
  action: 'keep' | 'release' | 'released' | 'gone' | 'failed';
  reason: string;
}

/**
 * The rule for leases: release one only when its owner no longer runs (so it cannot be
 * about to create the VM: an install leases before it creates) and no VM at its VMID uses
 * the address (gone, destroyed outside QemuRun, another VM there, or a template, which never
 * runs). The VM is read after the owner: an owner that closed before had made its VM by then.
 */
export function leaseVerdict(f: LeaseFacts): { action: 'keep' | 'release'; reason: string } {
  if (f.ownerUnread !== undefined) return { action: 'keep', reason: `its owner ${f.owner} could not be read: ${f.ownerUnread}` };
  if (f.ownerState === undefined || !OWNER_GONE_STATES.includes(f.ownerState)) return { action: 'keep', reason: `its owner ${f.owner} is ${(f.ownerState ?? 'unread').toLowerCase()}` };
  const closed = f.ownerState === 'UNKNOWN_TO_NAMESPACE' ? 'is unknown to the namespace' : `closed as ${f.ownerState.toLowerCase().replace('_', ' ')}`;
  if (f.vmid === undefined) return { action: 'release', reason: `its owner ${f.owner} ${closed} and it names no VM` };
  if (!f.vm) return { action: 'release', reason: `VM ${f.vmid} is gone and its owner ${f.owner} ${closed}` };
  if (f.vm.template) return { action: 'release', reason: `VM ${f.vmid} is a template, which never runs, and its owner ${f.owner} ${closed}` };
  if (f.vm.address !== f.address) {
    return { action: 'release', reason: `VM ${f.vmid} is another VM (its ipconfig0 has ${f.vm.address ?? 'no static address'}) and the lease's owner ${f.owner} ${closed}` };
  }
  return { action: 'keep', reason: `VM ${f.vmid} uses it` };
}
