import { WorkflowNotFoundError, type WorkflowClient } from '@temporalio/client';
import { type ProgressEvent, progressQuery, type RunState } from '../contract';
import type { ProgressPush, ProgressPushes } from '../lib/progressPushes';

/**
 * One progress reader per workflow in this API process: every stream of a workflow (the
 * install's own POST, re-attached GETs, a browser tab and a script) reads from it, so what
 * a workflow costs Temporal and the worker does not grow with the number of watchers.
 *
 * It reads with the progress query, which writes no history. While the workflow emits it
 * reads again soon (`fastMs`); each read that finds nothing stretches the pause, up to
 * `slowMs`, so a quiet install (a long download, a VM booting) costs a few reads a second.
 *
 * When the worker runs in this process too (role all), the workflow's progress sink pushes
 * each event as it is recorded: the reader takes a pushed event only when it is exactly
 * the next one, and reads at once on a gap, so every stream still gets each event once
 * and in order. The query stays the record: it fills gaps and sees runs whose worker is in
 * another process. While pushes bring a run's events (the last event a query found was
 * pushed before) it is sent only every `pushedSlowMs`; as soon as a query finds an event
 * no push brought, the reader polls as if there were no pushes.
 * docs/performance.md compares the query, an Update used as a long poll, and the push.
 */

export interface ReaderTiming {
  /** Pause after a read that found events. */
  fastMs: number;
  /** Longest pause while the workflow is quiet. */
  slowMs: number;
  /** Pause while no worker answers the query (restart, deploy). */
  stalledMs: number;
  /** Longest pause while the workflow is quiet and pushes bring its events. */
  pushedSlowMs: number;
}

/**
 * Each query is a task for the worker that holds the run, beside the run's own workflow
 * tasks: with 50 installs watched, 2 s between queries made them half of the worker's
 * tasks and slowed the pushes themselves. So 10 s while pushes bring the events.
 */
const DEFAULT_TIMING: ReaderTiming = { fastMs: 100, slowMs: 500, stalledMs: 1000, pushedSlowMs: 10_000 };

/**
 * A quiet workflow is described this often: terminated or timed out from outside, no
 * handler set a final state, and only its status tells.
 */
const DESCRIBE_EVERY_MS = 10_000;

export type ReaderEnd = 'closed' | 'not-found';

class ProgressReader {
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
  /** Events taken from pushes, for tests and diagnostics. */
  pushedEvents = 0;
  /** Pushes bring this run's events: a push was taken, and no query has found one since. */
  private pushesCover = false;
  /** Ends the pause between two reads early (a push showed a gap). */
  private wakeReader: (() => void) | undefined;
  /** A push showed a gap while a read was out: the next pause is skipped. */
  private readWanted = false;

  constructor(
    private readonly client: WorkflowClient,
    readonly workflowId: string,
    private readonly timing: ReaderTiming,
    private readonly onIdle: (reader: ProgressReader) => void,
    private readonly pushes?: ProgressPushes,
    /** The run, when the caller knows it (it has just started it): no describe needed. */
    readonly runId?: string,
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
      if (this.watchers.size > 0) return;
      if (this.running) this.readSoon(); // to stop now rather than after its pause
      else this.onIdle(this);
    };
  }

  private notify(): void {
    for (const wake of this.watchers) wake();
  }

  /** A push from this process's worker, for the run this reader is pinned to. */
  private pushed(push: ProgressPush): void {
    if (this.end !== undefined) return;
    if ('event' in push) {
      const next = this.events.length + 1;
      // Already read (by a query that crossed the push, or pushed twice): nothing new.
      if (push.event.seq < next) return;
      if (push.event.seq > next) return this.readSoon();
      this.events.push(push.event);
      this.pushedEvents++;
      this.pushesCover = true;
      this.notify();
    } else if (push.ended.lastSeq === this.events.length) {
      this.state = push.ended.state;
      this.end = 'closed';
      this.notify();
      this.readSoon();
    } else if (push.ended.lastSeq > this.events.length) {
      this.readSoon();
    }
  }

  private readSoon(): void {
    if (this.wakeReader) this.wakeReader();
    else this.readWanted = true;
  }

  private async pause(ms: number): Promise<void> {
    if (this.readWanted) {
      this.readWanted = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeReader = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeReader = undefined;
  }

  private async run(): Promise<void> {
    let pause = this.timing.fastMs;
    let lastDescribe = Date.now();
    let closedSeen = false;
    let unsubscribe: (() => void) | undefined;
    try {
      // Pinned to the run that is current now: a per-VM workflow id is reused by the next
      // operation on that VM, whose events must never be mixed into this run's.
      const pinned = this.runId ? { runId: this.runId } : await this.pinnedRun();
      const handle = pinned && this.client.getHandle(this.workflowId, pinned.runId);
      const runId = pinned?.runId;
      // Before the first read: what is pushed meanwhile is either in its answer or after it.
      if (handle && this.pushes) unsubscribe = this.pushes.subscribe(this.workflowId, (p) => p.runId === runId && this.pushed(p));
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
          const known = this.events.length;
          for (const e of page.events) if (e.seq === this.events.length + 1) this.events.push(e);
          // Events only the query brought (pushes already brought the rest while it was out).
          const found = this.events.length > known;
          // An event no push brought (a worker in another process, a missed push): poll.
          if (found) this.pushesCover = false;
          const slowMs = this.pushesCover ? this.timing.pushedSlowMs : this.timing.slowMs;
          // An end pushed while this read was out is newer than its answer.
          if (this.end === undefined) this.state = page.state;
          if (page.state !== 'running' && this.events.length >= page.lastSeq) this.end = 'closed';
          // Terminated or timed out from outside: no handler set a final state, so once it
          // is seen closed, the first read that finds nothing more is the last.
          else if (closedSeen && !found) this.end = 'closed';
          if (found || wasStalled || this.end) this.notify();
          if (this.end) break;
          if (found) {
            pause = Math.max(this.timing.fastMs, Math.min(slowMs, roundTrip));
            if (this.events.length < page.lastSeq) continue; // more pages waiting
          } else {
            // Covered by pushes, a read only checks for one that went missing: no need to ease in.
            pause = this.pushesCover ? slowMs : Math.max(Math.min(slowMs, Math.round(pause * 1.5)), Math.min(slowMs, roundTrip));
            if (Date.now() - lastDescribe >= DESCRIBE_EVERY_MS) {
              lastDescribe = Date.now();
              closedSeen = (await handle.describe()).status.name !== 'RUNNING';
            }
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
        if (this.end === undefined) await this.pause(pause);
      }
    } finally {
      unsubscribe?.();
      this.running = false;
      if (this.watchers.size === 0) this.onIdle(this);
    }
  }

  private async pinnedRun(): Promise<{ runId: string } | undefined> {
    for (;;) {
      try {
        const { runId } = await this.client.getHandle(this.workflowId).describe();
        return { runId };
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
    /** Given when this process runs the worker too (role all). */
    private readonly pushes?: ProgressPushes,
  ) {}

  /**
   * The reader of a workflow; a reader that has seen its run end serves only the streams
   * already on it, and the next stream gets a new one (the id may have a new run by now).
   * `runId`, when the caller has just started the run, spares the reader finding it out,
   * and a reader of another run of the id is left to the streams already on it.
   */
  reader(workflowId: string, runId?: string): ProgressReader {
    let reader = this.readers.get(workflowId);
    if (!reader || reader.end !== undefined || (runId !== undefined && reader.runId !== undefined && reader.runId !== runId)) {
      reader = new ProgressReader(
        this.client,
        workflowId,
        this.timing,
        (r) => {
          if (this.readers.get(r.workflowId) === r) this.readers.delete(r.workflowId);
        },
        this.pushes,
        runId,
      );
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
