import type { ProgressEvent, RunState } from '../contract';

/**
 * What a workflow run running in this process's worker just recorded: one event, or the
 * state it ended in with the sequence number of its last event. The worker's progress
 * sink publishes it after the workflow task that recorded it ran; nothing crosses a
 * process, so a process without a worker (role api) never hears of it.
 */
export type ProgressPush =
  | { workflowId: string; runId: string; event: ProgressEvent }
  | { workflowId: string; runId: string; ended: { state: RunState; lastSeq: number } };

export type ProgressListener = (push: ProgressPush) => void;

/** Hands progress from the worker to the API's progress readers of the same process. */
export class ProgressPushes {
  private readonly listeners = new Map<string, Set<ProgressListener>>();

  publish(push: ProgressPush): void {
    for (const listener of this.listeners.get(push.workflowId) ?? []) listener(push);
  }

  /** Hears the pushes of one workflow id (every run of it) until the returned function is called. */
  subscribe(workflowId: string, listener: ProgressListener): () => void {
    let set = this.listeners.get(workflowId);
    if (!set) this.listeners.set(workflowId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(workflowId) === set) this.listeners.delete(workflowId);
    };
  }

  /** Workflow ids listened to now, for tests. */
  get size(): number {
    return this.listeners.size;
  }
}
