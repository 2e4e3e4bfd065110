import { CancellationScope, isCancellation, proxySinks, setHandler } from '@temporalio/workflow';
import { type EventStatus, type OutputBatch, outputSignal, type ProgressEvent, progressQuery, type QemuRunSinks, type RunState } from '../contract';

/**
 * A run's progress, kept in the workflow: the API reads it with the progress query, and
 * activities add their command output with the output signal (both in contract/progress.ts).
 */

/** A query result must stay far below Temporal's 2 MB payload limit. */
const MAX_EVENTS_PER_PAGE = 500;

const { progress: pushed } = proxySinks<QemuRunSinks>();

/**
 * Where command output that came with an activity's result goes (the run's Progress).
 * Module state of a workflow module is the run's own: each run evaluates these modules
 * afresh (only workflows/preload.ts is shared).
 */
// eslint-disable-next-line no-restricted-syntax -- a run's own: its modules are evaluated afresh for it
let outputReceiver: ((batch: OutputBatch) => void) | undefined;

/** Output an activity's result carried (workflows/interceptors.ts): added as its output signal's would be. */
export function receiveOutputTail(batch: OutputBatch): void {
  outputReceiver?.(batch);
}

export class Progress {
  private readonly events: ProgressEvent[] = [];
  private runState: RunState = 'running';
  /** The step being run, which command output from activities is attributed to. */
  current = '';
  /** Set by a workflow once its VM has a VMID and an address. */
  vm?: { vmid: number; ip: string };
  /** The step each failure came out of, for steps run side by side (see sideBySide). */
  private readonly failedIn = new WeakMap<object, string>();

  constructor() {
    setHandler(progressQuery, (after) => ({
      events: this.events.filter((e) => e.seq > after).slice(0, MAX_EVENTS_PER_PAGE),
      state: this.runState,
      lastSeq: this.events.length,
      step: this.events.at(-1)?.step,
      vm: this.vm,
    }));
    outputReceiver = (batch) => {
      for (const line of batch.lines) this.emit(this.current, line.status, line.message);
    };
    setHandler(outputSignal, outputReceiver);
  }

  get state(): RunState {
    return this.runState;
  }

  /** Set once, when the run has recorded its last event. */
  set state(state: RunState) {
    this.runState = state;
    if (state !== 'running') pushed.ended(state, this.events.length);
  }

  emit(step: string, status: EventStatus, message: string): void {
    const event = { seq: this.events.length + 1, step, status, message, at: Date.now() };
    this.events.push(event);
    pushed.recorded(event);
  }

  info(step: string, message: string): void {
    this.emit(step, 'processing', `[*] ${message}`);
  }

  /**
   * Runs one pipeline step with the seed's events: `[*] <doing>` while it runs,
   * `[+] <doing> done (<seconds>s)` when it finished. Command output that activities
   * stream meanwhile is attributed to it.
   */
  async step<T>(name: string, doing: string, fn: () => Promise<T>): Promise<T> {
    this.current = name;
    const t0 = Date.now();
    this.info(name, doing);
    const value = await this.attributed(name, fn);
    this.emit(name, 'success', `[+] ${doing} done (${((Date.now() - t0) / 1000).toFixed(2)}s)`);
    return value;
  }

  /** Runs `fn`, a failure of which is the failure of step `name` (the innermost step that says so). */
  async attributed<T>(name: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (typeof err === 'object' && err !== null && !this.failedIn.has(err)) this.failedIn.set(err, name);
      throw err;
    }
  }

  /**
   * Runs branches of steps side by side (each branch's own steps in turn) and returns what
   * each returned. Every step still reports its start and its end; their events interleave.
   * On the first failure the other branches are cancelled and awaited, so none of their
   * activities still runs when the compensations do, and the failed step becomes the
   * current one: the error event and the cleanup's lines name it, whichever step started
   * last. A cancellation of the workflow reaches every branch.
   *
   * Command output (the output signal) goes to the current step, the one started last: a
   * caller gives output-streaming activities to one branch only, started after the others.
   */
  async sideBySide<T extends readonly unknown[]>(branches: { readonly [K in keyof T]: () => Promise<T[K]> }): Promise<T> {
    const scope = new CancellationScope();
    let failed: { err: unknown; step: string } | undefined;
    const settled = await scope.run(() =>
      Promise.allSettled(
        (branches as ReadonlyArray<() => Promise<unknown>>).map(async (branch) => {
          try {
            return await branch();
          } catch (err) {
            if (failed === undefined && !isCancellation(err)) {
              failed = { err, step: (typeof err === 'object' && err !== null ? this.failedIn.get(err) : undefined) ?? this.current };
              scope.cancel();
            }
            throw err;
          }
        }),
      ),
    );
    if (failed !== undefined) {
      this.current = failed.step;
      throw failed.err;
    }
    const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (rejected) throw rejected.reason;
    return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
  }

  /**
   * The seed's four closing events of a VM that is up (elapsed time, VMID, IP, user),
   * after which the stream ends.
   */
  finished(step: string, headline: string, vm: { vmid: number; ip: string; user: string }): void {
    this.emit(step, 'success', `[+] ${headline}`);
    this.emit(step, 'success', `[*] VMID: ${vm.vmid}`);
    this.emit(step, 'success', `[*] IP: ${vm.ip}`);
    this.emit(step, 'success', `[*] User: ${vm.user}`);
    this.state = 'completed';
  }
}
