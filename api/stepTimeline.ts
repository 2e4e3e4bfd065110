import type { ProgressEvent } from '../contract';

export interface StepSpan {
  step: string;
  /** Workflow time of the step's first and last event, ms since the epoch. */
  start: number;
  end: number;
  ms: number;
  /** `running` only while the operation runs: a closed one's steps all ended, with or without a `done` line. */
  status: 'done' | 'error' | 'running';
}

/**
 * Where an operation's time went: one span per step, from its first event to its last, in
 * the order the steps began. The events are the workflow's own record (its progress query),
 * stamped with workflow time as they were recorded; events without a time (a run recorded
 * before events had one) are left out.
 */
export function stepTimeline(events: readonly ProgressEvent[], closed: boolean): StepSpan[] {
  const spans = new Map<string, StepSpan>();
  for (const e of events) {
    if (e.at === undefined) continue;
    const span = spans.get(e.step) ?? { step: e.step, start: e.at, end: e.at, ms: 0, status: 'running' as const };
    span.end = Math.max(span.end, e.at);
    span.ms = span.end - span.start;
    if (e.status === 'error') span.status = 'error';
    else if (e.status === 'success' && span.status !== 'error') span.status = 'done';
    spans.set(e.step, span);
  }
  return [...spans.values()].map((s) => (closed && s.status === 'running' ? { ...s, status: 'done' as const } : s));
}
