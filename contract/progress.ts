import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { EventStatus, ProgressEvent } from './types';

/**
 * Progress lives in the workflow: the API streams it to SSE clients by querying
 * (queries write no history), and a client that reconnects asks for what came after the
 * last sequence number it saw. Activities add command output with the output signal.
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
