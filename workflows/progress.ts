import { proxySinks, setHandler } from '@temporalio/workflow';
import { type EventStatus, outputSignal, type ProgressEvent, progressQuery, type QemuRunSinks, type RunState } from '../contract';

/**
 * A run's progress, kept in the workflow: the API reads it with the progress query, and
 * activities add their command output with the output signal (both in contract/progress.ts).
 */

/** A query result must stay far below Temporal's 2 MB payload limit. */
const MAX_EVENTS_PER_PAGE = 500;

const { progress: pushed } = proxySinks<QemuRunSinks>();

export class Progress {
  private readonly events: ProgressEvent[] = [];
  private runState: RunState = 'running';
  /** The step being run, which command output from activities is attributed to. */
  current = '';
  /** Set by a workflow once its VM has a VMID and an address. */
  vm?: { vmid: number; ip: string };

  constructor() {
    setHandler(progressQuery, (after) => ({
      events: this.events.filter((e) => e.seq > after).slice(0, MAX_EVENTS_PER_PAGE),
      state: this.runState,
      lastSeq: this.events.length,
      step: this.events.at(-1)?.step,
      vm: this.vm,
    }));
    setHandler(outputSignal, (batch) => {
      for (const line of batch.lines) this.emit(this.current, line.status, line.message);
    });
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
    const value = await fn();
    this.emit(name, 'success', `[+] ${doing} done (${((Date.now() - t0) / 1000).toFixed(2)}s)`);
    return value;
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
