import { defineSignal } from '@temporalio/workflow';
import type { InstallResult, InstallSpec, ProgressEvent } from '../lib/types';

/**
 * What the rebuild workflows, their activities and the API share. Workflow code imports
 * this module, so it must stay free of Node.js imports.
 */

export interface RebuildInput {
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

/** Events of a child workflow (the install) copied into the rebuild's own progress. */
export interface RelayedProgress {
  events: Array<Omit<ProgressEvent, 'seq'>>;
}

export const relayedProgressSignal = defineSignal<[RelayedProgress]>('relayedProgress');
