import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { EventStatus, ProgressEvent } from './types';

/**
 * Progress lives in the workflow: the API streams it to SSE clients by querying
 * (queries write no history), and a client that reconnects asks for what came after the
 * last sequence number it saw. Activities add command output with the output signal, and
 * the last of it in their result (OUTPUT_TAIL).
 */

export type RunState = 'running' | 'completed' | 'failed' | 'cancelled';

export interface ProgressPage {
  events: ProgressEvent[];
  state: RunState;
  /** Sequence number of the last event that exists, whether returned or not. */
  lastSeq: number;
  /** The step of the last event: what a status poll reports without reading every event. */
  step?: string;
  /** The VM being built, once its VMID is reserved (a poller needs it before the end). */
  vm?: { vmid: number; ip: string };
}

/**
 * Lines of command output an activity sends in one batch (one signal, a few history
 * events). They belong to the step the workflow is running.
 */
export interface OutputBatch {
  lines: Array<{ status: EventStatus; message: string }>;
}

/**
 * The key of an activity result that carries the last of the activity's command output:
 * what it printed since its last output signal rides with its completion instead of a
 * signal of its own (one billable action fewer per streaming activity). The worker wraps
 * such results (activities/output.ts) and the workflow unwraps them before its code sees
 * them (workflows/interceptors.ts), so no activity or workflow code handles the wrapper.
 */
export const OUTPUT_TAIL = 'qemurunOutputTail';

export interface ResultWithOutputTail {
  [OUTPUT_TAIL]: OutputBatch;
  result: unknown;
}

/** An activity result and the output that came with it; a result from before the wrapper, or of an activity that printed nothing since its last signal, comes alone. */
export function splitOutputTail(value: unknown): { tail?: OutputBatch; result: unknown } {
  if (typeof value !== 'object' || value === null || !(OUTPUT_TAIL in value)) return { result: value };
  const wrapped = value as ResultWithOutputTail;
  return { tail: wrapped[OUTPUT_TAIL], result: wrapped.result };
}

/**
 * Progress as a workflow records it, for the API in the same process as the worker: its
 * streams get an event without waiting for their next query. Like every sink, it is called
 * only when a workflow task runs for the first time, never on replay, and after the task
 * ran, before Temporal has accepted it: the query stays the record (see api/progressReader.ts).
 */
export type ProgressSink = {
  recorded: (event: ProgressEvent) => void;
  ended: (state: RunState, lastSeq: number) => void;
};

/** Events of a child workflow (the install) copied into the rebuild's own progress. */
export interface RelayedProgress {
  events: Array<Omit<ProgressEvent, 'seq'>>;
}

export const progressQuery = defineQuery<ProgressPage, [number]>('progress');
export const outputSignal = defineSignal<[OutputBatch]>('output');
export const relayedProgressSignal = defineSignal<[RelayedProgress]>('relayedProgress');
