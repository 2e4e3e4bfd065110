import { Context } from '@temporalio/activity';
import { type Client, WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import { acquireSlotUpdate, releaseSlotUpdate, type SlotAnswer, type StorageSlotsState, storageSlotsWorkflowId } from '../contract';
import { keepAlive } from './keepAlive';

export interface StorageSlotDeps {
  config: Pick<Config, 'cloneConcurrency' | 'temporal'>;
  client: Client;
}

/**
 * How long a slot stays its holder's without a renewal. The holder renews it every
 * quarter of this while its work runs, so a clone may take as long as it takes; a worker
 * that dies holding one blocks that slot a minute at most.
 */
export const SLOT_TTL_MS = 60_000;
const RENEW_EVERY_MS = SLOT_TTL_MS / 4;

/** An update's own failure (a refused argument), not Temporal's wrapper. */
function unwrapUpdate(err: unknown): unknown {
  return err instanceof WorkflowUpdateFailedError && err.cause ? err.cause : err;
}

/**
 * Runs `fn` holding one of CLONE_CONCURRENCY slots of `storage` on `node`
 * (workflows/storageSlots.ts): waits its turn first, for as long as it takes, and
 * releases the slot when `fn` ends, however it ends. `holder` names the caller stably
 * across attempts (its workflow and activity ids): a retry after a crash gets back the
 * slot its predecessor held instead of queueing behind it.
 *
 * Called inside an activity. The wait heartbeats (the SDK throttles the beats, so an
 * activity that already heartbeats sends no more), and a cancellation of the activity ends
 * it and gives the claim back.
 */
export async function withStorageSlot<T>(
  deps: StorageSlotDeps,
  where: { node: string; storage: string; holder: string },
  fn: () => Promise<T>,
): Promise<T> {
  const { config, client } = deps;
  const workflowId = storageSlotsWorkflowId(config.temporal.taskQueue, where.node, where.storage);
  const ask = { holder: where.holder, limit: config.cloneConcurrency, ttlMs: SLOT_TTL_MS };
  const ctx = Context.current();
  const signal = ctx.cancellationSignal;

  const acquire = (renew = false): Promise<SlotAnswer> =>
    client.withAbortSignal(signal, () =>
      client.workflow.executeUpdateWithStart(acquireSlotUpdate, {
        args: [renew ? { ...ask, renew } : ask],
        startWorkflowOperation: new WithStartWorkflowOperation('storageSlots', {
          workflowId,
          taskQueue: config.temporal.taskQueue,
          args: [{ node: where.node, storage: where.storage, holders: [], waiting: [] } satisfies StorageSlotsState],
          workflowIdConflictPolicy: 'USE_EXISTING',
        }),
      }),
    );
  const release = () => client.workflow.getHandle(workflowId).executeUpdate(releaseSlotUpdate, { args: [{ holder: where.holder }] });

  await keepAlive(async () => {
    try {
      for (;;) {
        const answer = await acquire();
        if (answer.held) return;
        // The entity continued as new meanwhile, keeping this claim's place: ask its next run.
        if (answer.reason === 'continued-as-new') continue;
        throw new Error(`the slot on storage '${where.storage}' of node '${where.node}' was released while ${where.holder} waited for it`);
      }
    } catch (err) {
      // Given up (cancelled, or Temporal unreachable): the claim must not take a slot nobody uses.
      await release().catch(() => undefined);
      throw unwrapUpdate(err);
    }
  });

  const renewal = setInterval(() => {
    acquire(true).then(
      (answer) => {
        // Renewals that did not arrive in time (Temporal unreachable a minute): the work goes on.
        if (!answer.held) ctx.log.warn('storage slot freed by its ttl while its holder worked', { ...where });
      },
      () => undefined,
    );
  }, RENEW_EVERY_MS);
  try {
    return await fn();
  } finally {
    clearInterval(renewal);
    // A release that does not arrive is healed by the slot's ttl.
    await release().catch(() => undefined);
  }
}
