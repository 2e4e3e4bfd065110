import type { InstallResult, InstallSecrets, InstallSpec } from './types';
import type { ReconcileInput, ReconcileResult } from './reconcile';
import type { AddressPoolState } from './addressPools';
import type { StorageSlotsState } from './storageSlots';
import type { BuildTemplateInput, BuildTemplateResult } from './templates';

/**
 * Every workflow type of the product: its name (what the API starts and the Temporal UI
 * shows), its input and its result. The worker registers functions with exactly these
 * signatures (worker/worker.ts checks it at compile time); the API starts them by name,
 * e.g. `client.workflow.start<Workflows['installVm']>('installVm', …)`.
 */

export interface InstallInput {
  spec: InstallSpec;
  secrets: InstallSecrets;
  /**
   * Sent by earlier versions of the API, whose MAIN_NODE could differ from the worker's.
   * Read only when replaying those installs: the worker's MAIN_NODE decides where a VM is
   * created, and createVm's result says which node that was.
   */
  mainNode?: string;
}

/**
 * What binds a command on an existing VM to the moment and the VM it was issued for
 * (docs/security.md, "Commands on an existing VM"). An input recorded in history can be
 * started again as it is; these fields make that fail: the workflow refuses an input
 * issued for another workflow id or longer ago than INPUT_LIFETIME_MS, and every activity
 * that acts refuses a VM at the VMID that is another instance. Absent only in inputs
 * recorded by earlier versions, which replay as they ran; a new start without them is refused.
 */
export interface IssuedCommand {
  /** The VM's SMBIOS uuid (smbios1) when the API accepted the command. */
  instance?: string;
  /** When the API issued the command: milliseconds since the epoch. */
  issuedAt?: number;
  /** The workflow id the command was issued for (`vm-<vmid>`). */
  issuedFor?: string;
}

export interface VmRef extends IssuedCommand {
  vmid: number;
}

/**
 * Where the guest answers SSH: the VM's IP and the OS default user (from its tag). No IP:
 * a DHCP VM whose agent did not answer (it is stopped): the workflow reads the address
 * from the guest agent once the VM runs.
 */
export interface GuestRef extends VmRef {
  ip?: string;
  user: string;
}

export interface VmOperationResult {
  vmid: number;
  /** The workflow type that ran, e.g. `vmStart`. */
  operation: string;
  elapsedSec: number;
  node?: string;
  /** vmSetDisk: the new size of the disk, in bytes. */
  sizeBytes?: number;
}

export interface RebuildInput extends IssuedCommand {
  vmid: number;
  /**
   * The spec to re-create the VM from. Absent: the one recorded in the VM's description
   * (the usual case). Given (a schedule made from a full install spec): it wins, and a
   * missing VM is installed from it.
   */
  spec?: InstallSpec;
  /** Cloud-init user password; the spec marker holds no secrets. Absent: the VM keeps the one it has. */
  passwd?: string;
}

export interface RebuildResult extends InstallResult {
  /** The install child workflow that re-created the VM (and is its new owner). */
  installWorkflowId: string;
  /** Owner marker of the VM that was destroyed; undefined when there was none to destroy. */
  replacedOwner?: string;
}

/** What one scheduled run did: rebuilt the VM, or skipped because another operation held it. */
export type ScheduledRebuildResult =
  | { outcome: 'rebuilt'; vmid: number; rebuildWorkflowId: string; rebuild: RebuildResult }
  | { outcome: 'skipped'; vmid: number; reason: string; runningWorkflowId?: string; runningType?: string };

export interface Workflows {
  installVm: (input: InstallInput) => Promise<InstallResult>;
  vmStart: (input: GuestRef) => Promise<VmOperationResult>;
  vmReboot: (input: GuestRef) => Promise<VmOperationResult>;
  vmShutdown: (input: VmRef) => Promise<VmOperationResult>;
  vmStop: (input: VmRef) => Promise<VmOperationResult>;
  vmDestroy: (input: VmRef) => Promise<VmOperationResult>;
  vmSetCpu: (input: VmRef & { cores: number }) => Promise<VmOperationResult>;
  vmSetMemory: (input: VmRef & { memoryMb: number }) => Promise<VmOperationResult>;
  vmSetDisk: (input: VmRef & { disk: string; incrementGb: number; maxDiskGb?: number }) => Promise<VmOperationResult>;
  vmMigrate: (input: VmRef & { from: string; target: string }) => Promise<VmOperationResult>;
  vmAdopt: (input: VmRef & { by?: string; tenant?: string }) => Promise<VmOperationResult>;
  vmRebuild: (input: RebuildInput) => Promise<RebuildResult>;
  scheduledRebuild: (input: RebuildInput) => Promise<ScheduledRebuildResult>;
  reconcileVms: (input?: ReconcileInput) => Promise<ReconcileResult>;
  /** A golden template of an OS version (./templates.ts), on demand or from its schedule. */
  buildTemplate: (input: BuildTemplateInput) => Promise<BuildTemplateResult>;
  /** An address pool's leases (./addressPools.ts): an entity that never ends, with no progress of its own. */
  addressPool: (state: AddressPoolState) => Promise<void>;
  /** A storage's clone slots (./storageSlots.ts): an entity like addressPool. */
  storageSlots: (state: StorageSlotsState) => Promise<void>;
}

export type WorkflowType = keyof Workflows;

/** The names of the operations' workflow types, for places that list them (the API's run lookup); the entities (pools, slots) are none. */
export const WORKFLOW_TYPES = Object.keys({
  installVm: true,
  vmStart: true,
  vmReboot: true,
  vmShutdown: true,
  vmStop: true,
  vmDestroy: true,
  vmSetCpu: true,
  vmSetMemory: true,
  vmSetDisk: true,
  vmMigrate: true,
  vmAdopt: true,
  vmRebuild: true,
  scheduledRebuild: true,
  reconcileVms: true,
  buildTemplate: true,
} satisfies Record<Exclude<WorkflowType, 'addressPool' | 'storageSlots'>, true>) as WorkflowType[];

/**
 * The reserved field of every workflow input that names the workflow type the input was
 * written for. The payload codec binds a payload to its workflow *id* (the SDK tells it no
 * more), so without this an input recorded under `vm-240` for `vmStop` could start a
 * `vmDestroy` under `vm-240`. Inside the input, the type is encrypted and id-bound with it:
 * whoever lacks the key can neither write nor change it. Every starter adds it (the API's
 * client interceptor, schedules, child workflows); the workflow interceptor
 * (workflows/interceptors.ts) compares it with the run's type and removes it before the
 * workflow sees its input.
 */
export const WORKFLOW_TYPE_FIELD = 'qemurunWorkflowType';

/** A workflow's arguments with the type it is started as in its input (every QemuRun workflow takes one object, or nothing). */
export function withWorkflowType(workflowType: string, args: readonly unknown[]): unknown[] {
  const [first, ...rest] = args;
  if (first === undefined) return [{ [WORKFLOW_TYPE_FIELD]: workflowType }, ...rest];
  if (typeof first !== 'object' || first === null || Array.isArray(first)) {
    throw new TypeError(`the input of workflow ${workflowType} must be an object to carry its workflow type`);
  }
  return [{ ...first, [WORKFLOW_TYPE_FIELD]: workflowType }, ...rest];
}

/** An input read back (a schedule's action) without its workflow type, and the type it named. */
export function splitWorkflowType(input: unknown): { input: unknown; workflowType?: unknown } {
  if (typeof input !== 'object' || input === null || Array.isArray(input) || !Object.hasOwn(input, WORKFLOW_TYPE_FIELD)) return { input };
  const { [WORKFLOW_TYPE_FIELD]: workflowType, ...rest } = input as Record<string, unknown>;
  return { input: rest, workflowType };
}
