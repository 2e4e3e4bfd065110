import { WorkflowNotFoundError, type WorkflowClient, type WorkflowHandle } from '@temporalio/client';
import { type ProgressEvent, progressQuery, type RunState } from '../contract';

/**
 * One progress reader per workflow in this API process: every stream of a workflow (the
 * install's own POST, re-attached GETs, a browser tab and a script) reads from it, so what
 * a workflow costs Temporal and the worker does not grow with the number of watchers.
 *
 * It reads with the progress query, which writes no history. While the workflow emits it
 * reads again soon (`fastMs`); each read that finds nothing stretches the pause, up to
 * `slowMs`, so a quiet install (a long download, a VM booting) costs a few reads a second.
 * docs/performance.md says why a query and not an Update or a push from the activities.
 */

export interface ReaderTiming {
  /** Pause after a read that found events. */
  fastMs: number;
  /** Longest pause while the workflow is quiet. */
  slowMs: number;
  /** Pause while no worker answers the query (restart, deploy). */
  stalledMs: number;
}

export const DEFAULT_TIMING: ReaderTiming = { fastMs: 100, slowMs: 500, stalledMs: 1000 };

/** A quiet workflow is described every this many empty reads: a terminated one stays 'running'. */
const DESCRIBE_EVERY = 20;

export type ReaderEnd = 'closed' | 'not-found';

export class ProgressReader {
  /** Every event read so far, in order: events[i].seq === i + 1. */
  private readonly events: ProgressEvent[] = [];
  private readonly watchers = new Set<() => void>();
  private running = false;
  /** Set once the workflow is closed and every event is read, or it does not exist. */
  end: ReaderEnd | undefined;
  state: RunState = 'running';
  /** Since when the query has failed (no worker polling); undefined while it answers. */
  stalledSince: number | undefined;
  /** Progress queries sent for this workflow, for tests and diagnostics. */
  reads = 0;

  constructor(
    private readonly client: WorkflowClient,
    readonly workflowId: string,
    private readonly timing: ReaderTiming,
    private readonly onIdle: (reader: ProgressReader) => void,
  ) {}

  /** Events after sequence number `after`, as far as read. */
  eventsAfter(after: number): ProgressEvent[] {
    return this.events.slice(Math.max(0, after));
  }

  get lastSeq(): number {
    return this.events.length;
  }

  /** `wake` is called after every read that changed something; the returned function leaves. */
  watch(wake: () => void): () => void {
    this.watchers.add(wake);
    if (!this.running && this.end === undefined) {
      this.running = true;
      void this.run();
    }
    return () => {
      this.watchers.delete(wake);
      if (this.watchers.size === 0 && !this.running) this.onIdle(this);
    };
  }

  private notify(): void {
    for (const wake of this.watchers) wake();
  }

  private async run(): Promise<void> {
    let pause = this.timing.fastMs;
    let emptyReads = 0;
    let closedSeen = false;
    try {
      // Pinned to the run that is current now: a per-VM workflow id is reused by the next
      // operation on that VM, whose events must never be mixed into this run's.
      const handle = await this.pinnedHandle();
      while (handle && this.watchers.size > 0 && this.end === undefined) {
        const sent = Date.now();
        try {
          this.reads++;
          const page = await handle.query(progressQuery, this.events.length);
          // A slow answer means a busy worker or server: ask no more often than it answers.
          const roundTrip = Date.now() - sent;
          const wasStalled = this.stalledSince !== undefined;
          this.stalledSince = undefined;
          // A page starts right after the last event read; anything else is dropped rather
          // than risk a gap or a repeat in what clients see.
          for (const e of page.events) if (e.seq === this.events.length + 1) this.events.push(e);
          this.state = page.state;
          const found = page.events.length > 0;
          if (page.state !== 'running' && this.events.length >= page.lastSeq) this.end = 'closed';
          // Terminated or timed out from outside: no handler set a final state, so once it
          // is seen closed, the first read that finds nothing more is the last.
          else if (closedSeen && !found) this.end = 'closed';
          if (found || wasStalled || this.end) this.notify();
          if (this.end) break;
          if (found) {
            emptyReads = 0;
            pause = Math.max(this.timing.fastMs, Math.min(this.timing.slowMs, roundTrip));
            if (this.events.length < page.lastSeq) continue; // more pages waiting
          } else {
            pause = Math.max(Math.min(this.timing.slowMs, Math.round(pause * 1.5)), Math.min(this.timing.slowMs, roundTrip));
            if (++emptyReads % DESCRIBE_EVERY === 0) closedSeen = (await handle.describe()).status.name !== 'RUNNING';
          }
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) {
            this.end = 'not-found';
            this.notify();
            break;
          }
          // No worker polling: the workflow itself is safe in Temporal; keep asking.
          if (this.stalledSince === undefined) {
            this.stalledSince = Date.now();
            this.notify();
          }
          pause = this.timing.stalledMs;
        }
        await new Promise((r) => setTimeout(r, pause));
      }
    } finally {
      this.running = false;
      if (this.watchers.size === 0) this.onIdle(this);
    }
  }

  private async pinnedHandle(): Promise<WorkflowHandle | undefined> {
    for (;;) {
      try {
        const { runId } = await this.client.getHandle(this.workflowId).describe();
        return this.client.getHandle(this.workflowId, runId);
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) {
          this.end = 'not-found';
          this.notify();
          return undefined;
        }
        if (this.watchers.size === 0) return undefined;
        await new Promise((r) => setTimeout(r, this.timing.stalledMs));
      }
    }
  }
}

/** The readers of one API process, one per workflow that has at least one stream open. */
export class ProgressReaders {
  private readonly readers = new Map<string, ProgressReader>();

  constructor(
    private readonly client: WorkflowClient,
    private readonly timing: ReaderTiming = DEFAULT_TIMING,
  ) {}

  /**
   * The reader of a workflow; a reader that has seen its run end serves only the streams
   * already on it, and the next stream gets a new one (the id may have a new run by now).
   */
  reader(workflowId: string): ProgressReader {
    let reader = this.readers.get(workflowId);
    if (!reader || reader.end !== undefined) {
      reader = new ProgressReader(this.client, workflowId, this.timing, (r) => {
        if (this.readers.get(r.workflowId) === r) this.readers.delete(r.workflowId);
      });
      this.readers.set(workflowId, reader);
    }
    return reader;
  }

  /** A stream already reads this workflow here: it exists, no need to ask Temporal. */
  known(workflowId: string): boolean {
    const reader = this.readers.get(workflowId);
    return reader !== undefined && reader.end !== 'not-found';
  }

  /** Readers alive now (workflows with an open stream). */
  get size(): number {
    return this.readers.size;
  }
}

const perClient = new WeakMap<WorkflowClient, ProgressReaders>();

/** The readers shared by every stream that goes through this client. */
export function progressReaders(client: WorkflowClient): ProgressReaders {
  let readers = perClient.get(client);
  if (!readers) {
    readers = new ProgressReaders(client);
    perClient.set(client, readers);
  }
  return readers;
}
