import type { ProgressEvent } from '../contract';

/** One stretch of time a step ran: from its `[*] <doing>` to its `[+] <doing> done`, or its error. */
export interface StepRun {
  start: number;
  end: number;
}

export interface StepSpan {
  step: string;
  /** Workflow time of the step's first and last event, ms since the epoch. */
  start: number;
  end: number;
  /** The time it ran: the sum of its runs, not end − start. */
  ms: number;
  /** When it ran: once for most steps, twice for the SSH wait of an install that reboots. */
  runs: StepRun[];
  /** `running` only while the operation runs: a closed one's steps all ended, with or without a `done` line. */
  status: 'done' | 'error' | 'running';
}

/** The seed's end-of-step line: `[+] <doing> done (<seconds>s)`. */
const DONE = /^\[\+\] (.*) done \(\d+(?:\.\d+)?s\)$/;

interface Open {
  /** When the stretch since the step's last run began: its first event after that run. */
  since?: number;
  /** `[*] <doing>` lines since then, by their text: a done line names the one it ends. */
  begun: Map<string, number>;
}

/**
 * Where an operation's time went: one span per step, in the order the steps began, each
 * with the stretches it ran. A step can report after it ended (the host key the SSH wait
 * pinned, the guest agent's answer that runs beside the cloud-init wait) and run again
 * (the SSH wait after a reboot): those notes are not its time, so a run is from the line
 * that started it to the line that ended it. The events are the workflow's own record (its
 * progress query), stamped with workflow time as they were recorded; events without a time
 * (a run recorded before events had one) are left out.
 */
export function stepTimeline(events: readonly ProgressEvent[], closed: boolean): StepSpan[] {
  const spans = new Map<string, StepSpan>();
  const open = new Map<string, Open>();
  let last: ProgressEvent | undefined;
  for (const e of events) {
    if (e.at === undefined) continue;
    last = e;
    const span = spans.get(e.step) ?? { step: e.step, start: e.at, end: e.at, ms: 0, runs: [], status: 'running' as const };
    span.end = Math.max(span.end, e.at);
    const o = open.get(e.step) ?? { begun: new Map<string, number>() };
    o.since ??= e.at;
    if (e.status === 'processing' && e.message.startsWith('[*] ') && !o.begun.has(e.message.slice(4))) o.begun.set(e.message.slice(4), e.at);
    if (e.status === 'success' || e.status === 'error') {
      const doing = DONE.exec(e.message)?.[1];
      span.runs.push({ start: (doing !== undefined ? o.begun.get(doing) : undefined) ?? o.since, end: e.at });
      open.delete(e.step);
    } else open.set(e.step, o);
    if (e.status === 'error') span.status = 'error';
    else if (e.status === 'success' && span.status !== 'error') span.status = 'done';
    spans.set(e.step, span);
  }
  // What a step recorded after its last run is a note, unless it never ended a run, or it
  // is still going: the operation runs and this step began the latest stretch.
  for (const [step, o] of open) {
    const span = spans.get(step)!;
    const going = !closed && last !== undefined && last.step === step;
    if (o.since !== undefined && (span.runs.length === 0 || going)) span.runs.push({ start: o.since, end: span.end });
  }
  return [...spans.values()].map((s) => {
    const ms = s.runs.reduce((sum, r) => sum + r.end - r.start, 0);
    return { ...s, ms, status: closed && s.status === 'running' ? ('done' as const) : s.status };
  });
}
