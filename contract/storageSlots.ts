import { defineQuery, defineUpdate } from '@temporalio/workflow';

/**
 * The storage slot entity workflows (workflows/storageSlots.ts): one per storage of a
 * node, id `<task queue>-storage-slots-<node>-<storage>`, handing out at most `limit` slots at once to
 * the clones on that storage. pve-storage takes the storage's lock around every linked
 * clone and waits 10 s for it: past a few clones at once, the ones behind fail
 * (`can't lock file '/var/lock/pve-manager/pve-storage-<id>' - got timeout`). A slot
 * first, then `qm clone`, and they queue here instead, without a deadline.
 */

/**
 * Named for the task queue too, as the reconcile schedule is (`<queue>-reconcile`): the entity
 * runs on the queue of the worker that started it, so one started by another deployment, or
 * before TEMPORAL_TASK_QUEUE changed, would hold every acquire forever with no worker to run it.
 */
export const storageSlotsWorkflowId = (taskQueue: string, node: string, storage: string): string => `${taskQueue}-storage-slots-${node}-${storage}`;

/** A slot taken, or a place in the queue for one. */
export interface SlotClaim {
  /** Who: an activity attempt's stable name (its workflow and activity ids), so a retry is the same holder. */
  holder: string;
  /** ISO time of the holder's last acquire: a slot (or a queued claim) older than `ttlMs` is dropped. */
  since: string;
  ttlMs: number;
}

export interface StorageSlotsState {
  node: string;
  storage: string;
  holders: SlotClaim[];
  /** In order of arrival: the first ones get the next free slots. */
  waiting: SlotClaim[];
  /** Updates a run takes before it continues as new; absent: the workflow's default. */
  updatesPerRun?: number;
}

export interface AcquireSlot {
  holder: string;
  /** Slots on this storage: CLONE_CONCURRENCY of the worker asking. */
  limit: number;
  /** How long the slot is the holder's without another acquire: a dead holder's is freed then. */
  ttlMs: number;
  /** Only renew a slot held: a holder whose slot was freed meanwhile is told so (`expired`), not queued. */
  renew?: boolean;
}

/**
 * `held`: the holder has a slot. Not held: ask again (`continued-as-new`: the entity
 * handed over to its next run, which kept the claim's place in the queue), or stop
 * (`released`: a release for this holder came while it waited; `expired`: a renewal
 * found the slot freed by its ttl).
 */
export type SlotAnswer = { held: true; holders: number } | { held: false; reason: 'continued-as-new' | 'released' | 'expired' };

export interface StorageSlotsView {
  node: string;
  storage: string;
  holders: SlotClaim[];
  waiting: string[];
}

export const acquireSlotUpdate = defineUpdate<SlotAnswer, [AcquireSlot]>('acquire');
/** Whether the holder held a slot or waited for one (a second release finds nothing). */
export const releaseSlotUpdate = defineUpdate<boolean, [{ holder: string }]>('release');
export const storageSlotsQuery = defineQuery<StorageSlotsView>('slots');
