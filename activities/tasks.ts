import { Context } from '@temporalio/activity';

/**
 * A Proxmox task (UPID) an activity started, kept in its heartbeat details. The task runs
 * on its node whatever happens to the worker; when the worker dies, Temporal retries the
 * activity with the last heartbeat's details, and the retry follows the task it finds
 * there instead of starting the operation again (a second migration, a second download).
 */
interface TaskCheckpoint {
  upid: string;
}

/** Details of this attempt's heartbeats, so every heartbeat keeps carrying them. */
// eslint-disable-next-line no-restricted-syntax -- keyed by the attempt's own Context: nothing else reaches an entry
const checkpoints = new WeakMap<Context, TaskCheckpoint>();

/**
 * A heartbeat that keeps what was checkpointed: a heartbeat without details erases them.
 * Until this attempt records a task, that is the earlier attempt's: a retry that beats
 * while it still reads that task's status must not leave the next attempt without it.
 */
export function beat(ctx: Context = Context.current()): void {
  ctx.heartbeat(checkpoints.get(ctx) ?? earlierTask(ctx));
}

/** The task the attempt before this one recorded, if any. */
function earlierTask(ctx: Context): TaskCheckpoint | undefined {
  const before = ctx.info.heartbeatDetails as Partial<TaskCheckpoint> | undefined;
  return typeof before?.upid === 'string' ? { upid: before.upid } : undefined;
}

/**
 * TaskOptions for a ProxmoxNode call: the UPID an earlier attempt recorded, if any, to
 * follow, and the hook that records a new one at once (checkpointed again right away, so a
 * second crash finds it too).
 */
export function recordedTask(): { resumeTask?: string; onTask: (upid: string) => void; stopTaskOnAbort: (reason: unknown) => boolean } {
  const ctx = Context.current();
  return {
    resumeTask: earlierTask(ctx)?.upid,
    onTask: (upid) => {
      checkpoints.set(ctx, { upid });
      beat(ctx);
    },
    // Only the workflow's own cancellation ends the task. A worker shutting down, or an
    // attempt timing out, leaves it running for the next attempt to follow.
    stopTaskOnAbort: (reason) => (reason as { message?: unknown } | undefined)?.message === 'CANCELLED',
  };
}
