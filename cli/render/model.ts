import type { StreamEvent } from '../events';

/**
 * What an operation's events mean to a person watching: the steps in the order they started
 * (running, done, failed, or stopped when a step beside them failed, with their elapsed
 * time); steps that run side by side (contract/steps.ts) are running together, each event
 * read under its own step, a percentage where the step reports one (image
 * download and copy, disk import, migration), the last lines of command output (the init
 * script's), and the closing summary. Pure: every renderer (terminal, plain, tests) reads
 * the same model.
 */

export type StepState = 'running' | 'done' | 'failed' | 'stopped';

export interface StepView {
  name: string;
  state: StepState;
  /** When this client saw it start (local clock); the elapsed time while it runs. */
  seenAt: number;
  /** The server's figure from `[+] ... done (1.32s)`, once done. */
  elapsedSec?: number;
  percent?: number;
  /** Command output of the step, newest last, at most OUTPUT_KEPT lines. */
  output: string[];
  /** Notices about the step after it finished (`VMID 120, IP ..., name ...`). */
  details: string[];
  /** The `[*]` line that opened it: what it was doing, or, for a step that ends without a `done`, what it decided. */
  opening?: string;
  error?: string;
}

export interface Summary {
  headline?: string;
  /** `[*] VMID: 120` and the like, in order. */
  facts: Array<[string, string]>;
}

const OUTPUT_KEPT = 50;

/**
 * The install's steps that run side by side, by their wire names: a copy of
 * `sideBySideSteps` in contract/steps.ts (test/unit/steps.test.ts holds the two equal).
 * Groups of branches: a branch's steps run in turn, beside every other branch of its group.
 */
export const SIDE_BY_SIDE: ReadonlyArray<ReadonlyArray<readonly string[]>> = [
  [['preparation > storage'], ['preparation > CPU baseline'], ['preparation > template', 'OS preparation > download', 'OS preparation > stage image'], ['SSH preparation > main node key']],
  [['VM initialization > wait for SSH'], ['VM initialization > init script']],
];

/** Whether steps `a` and `b` may run at the same time: in other branches of one group. */
function runSideBySide(a: string, b: string): boolean {
  return SIDE_BY_SIDE.some((group) => {
    const [ia, ib] = [a, b].map((name) => group.findIndex((branch) => branch.includes(name)));
    return ia >= 0 && ib >= 0 && ia !== ib;
  });
}

const DONE = /^\[\+\] .* done \((\d+(?:\.\d+)?)s\)$/;
const PERCENT = /(\d{1,3}(?:\.\d+)?)%\)?(?:\s|$)/g;
const WORKFLOW_ID = /^\[\*\] workflow id: (\S+)/;
const FACT = /^\[\*\] ([A-Za-z][\w ]*): (.+)$/;

/** Drops the seed's `[*]` / `[+]` / `[-]` marker: the renderer says it with a symbol. */
function unmarked(message: string): string {
  return message.replace(/^\[[*+-]\] /, '');
}

/** The last percentage a line reports (`transferred 1.2 GiB of 2.0 GiB (61.02%)`), if any. */
export function percentOf(message: string): number | undefined {
  const all = [...message.matchAll(PERCENT)];
  if (all.length === 0) return undefined;
  const p = Number(all[all.length - 1][1]);
  return p >= 0 && p <= 100 ? p : undefined;
}

export class ProgressModel {
  workflowId?: string;
  readonly steps: StepView[] = [];
  readonly summary: Summary = { facts: [] };
  /** The error event that ended the operation, if one did. */
  failure?: StreamEvent;
  events = 0;

  apply(e: StreamEvent, now = Date.now()): void {
    this.events++;
    const named = WORKFLOW_ID.exec(e.message);
    if (named && e.step.endsWith('> workflow')) {
      // A rebuild relays its install's events, whose own workflow id is not the one to attach to.
      this.workflowId ??= named[1];
      return;
    }
    if (e.status === 'error') {
      const step = this.runningNamed(e.step) ?? this.current(e.step) ?? this.open(e.step, now);
      step.state = 'failed';
      step.error = unmarked(e.message);
      this.failure = e;
      // The steps beside it were cancelled with it.
      for (const other of this.running) other.state = 'stopped';
      return;
    }
    if (e.step.endsWith('> finalizing') && (e.status === 'success' || e.status === 'info')) {
      // The run is over: a step still open has ended.
      for (const step of this.running) this.end(step);
      const fact = FACT.exec(e.message);
      if (fact) this.summary.facts.push([fact[1], fact[2]]);
      else {
        // The last headline wins with its own facts: a rebuild's after its relayed install's.
        this.summary.headline = unmarked(e.message);
        this.summary.facts.length = 0;
      }
      return;
    }
    const running = this.runningNamed(e.step);
    if (running) {
      if (!this.finished(running, e)) this.output(running, e.message);
      return;
    }
    const ended = this.endedNamed(e.step);
    if (ended) {
      ended.details.push(unmarked(e.message));
      return;
    }
    // A step's first event is its `[*] <doing>`; a relayed or late event opens it too.
    const step = this.open(e.step, now);
    if (e.message.startsWith('[*] ')) step.opening = unmarked(e.message);
    else if (!this.finished(step, e)) this.output(step, e.message);
  }

  get running(): StepView[] {
    return this.steps.filter((s) => s.state === 'running');
  }

  /** `success` once the stream closed without an error event. */
  outcome(closed: boolean): 'success' | 'failed' | 'unfinished' {
    if (this.failure) return 'failed';
    return closed ? 'success' : 'unfinished';
  }

  private current(name: string): StepView | undefined {
    const latest = this.steps.at(-1);
    return latest?.name === name ? latest : undefined;
  }

  private runningNamed(name: string): StepView | undefined {
    return [...this.steps].reverse().find((s) => s.name === name && s.state === 'running');
  }

  /**
   * The ended step a notice belongs to (`VMID 120, IP ..., name ...` after `qm create`):
   * the last step of that name, when every step started since runs beside it. A step of
   * that name after others (the SSH wait after the reboot) is a new one.
   */
  private endedNamed(name: string): StepView | undefined {
    const at = this.steps.map((s) => s.name).lastIndexOf(name);
    if (at < 0 || !this.steps.slice(at + 1).every((s) => runSideBySide(s.name, name))) return undefined;
    return this.steps[at];
  }

  private open(name: string, now: number): StepView {
    // A new step means the ones before have ended even if their `done` never came (a
    // rebuild relays its install's events as they are, and a step can end without one),
    // unless they run beside it.
    for (const step of this.running) if (!runSideBySide(step.name, name)) this.end(step);
    const step: StepView = { name, state: 'running', seenAt: now, output: [], details: [] };
    this.steps.push(step);
    return step;
  }

  /**
   * A step that ends without its `done`: one whose only event says what it decided (`no
   * reboot needed: …`) keeps that line under it, where it stays on screen.
   */
  private end(step: StepView | undefined): void {
    if (step?.state !== 'running') return;
    step.state = 'done';
    if (step.elapsedSec === undefined && step.opening !== undefined && step.output.length === 0) step.details.push(step.opening);
  }

  /** Ends the step on its `[+] <doing> done (1.32s)`; other success lines are its output. */
  private finished(step: StepView, e: StreamEvent): boolean {
    const m = e.status === 'success' ? DONE.exec(e.message) : null;
    if (!m) return false;
    step.state = 'done';
    step.elapsedSec = Number(m[1]);
    return true;
  }

  private output(step: StepView, message: string): void {
    const p = percentOf(message);
    if (p !== undefined) {
      step.percent = p;
      return;
    }
    step.output.push(message.startsWith('[*] ') ? unmarked(message) : message);
    if (step.output.length > OUTPUT_KEPT) step.output.splice(0, step.output.length - OUTPUT_KEPT);
  }
}
