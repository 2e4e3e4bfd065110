import { AsyncLocalStorage } from 'node:async_hooks';
import { type EventStatus, type OutputBatch, OUTPUT_TAIL, type ResultWithOutputTail, outputSignal } from '../contract';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { beat } from './tasks';

export interface OutputStream {
  line(message: string, status?: EventStatus): void;
  /** Hands over what is buffered (see carryingOutputTail) and waits for signals in flight; call before the activity returns. */
  close(): Promise<void>;
}

type OutputLine = OutputBatch['lines'][number];

const FLUSH_INTERVAL_MS = 1000;
const MAX_LINES_PER_BATCH = 1000;
const MAX_LINE_LENGTH = 2000;
const MIN_MASKED_LENGTH = 8;
/** A tail larger than this goes as a signal: a result stays far below Temporal's payload limit. */
const MAX_TAIL_CHARS = 64 * 1024;

/**
 * The output an activity printed after its last signal, held for its result, and how to
 * send it as a signal instead if the activity fails (a failure carries no result).
 */
interface HeldTail {
  lines: OutputLine[];
  send?: (lines: OutputLine[]) => Promise<void>;
}

/** Each activity attempt's held tail, set by carryingOutputTail around it. */
const heldTails = new AsyncLocalStorage<HeldTail>();

/**
 * Runs one activity attempt (the worker's activity interceptor calls it) so that the output
 * its streams hold at the end rides with its result (contract OUTPUT_TAIL): the workflow
 * gets it with the completion, in the same workflow task, instead of as one more signal.
 * An attempt that fails sends what it holds as a signal, so its last lines (often the
 * error) still reach the step before the failure does.
 */
export async function carryingOutputTail(run: () => Promise<unknown>): Promise<unknown> {
  const held: HeldTail = { lines: [] };
  let result: unknown;
  try {
    result = await heldTails.run(held, run);
  } catch (err) {
    if (held.lines.length > 0) await held.send?.(held.lines);
    throw err;
  }
  if (held.lines.length === 0) return result;
  return { [OUTPUT_TAIL]: { lines: held.lines }, result } satisfies ResultWithOutputTail;
}

/**
 * Streams command output into the running workflow's progress. Lines are batched into
 * one signal per second, so an init script printing thousands of lines costs a handful
 * of history events, and the SSE client still sees them within about a second; what is
 * left when the activity ends goes with its result (carryingOutputTail), so an activity
 * done within a second sends no signal at all.
 */
export function outputStream(client: Client, redact: string[] = []): OutputStream {
  const ctx = Context.current();
  const { workflowId, runId } = ctx.info.workflowExecution ?? {};
  if (!workflowId) throw new Error('outputStream needs an activity started by a workflow');
  const handle = client.workflow.getHandle(workflowId, runId);
  // A second net only: secrets are kept out of output by construction (the init script
  // reads the root password from stdin and never prints it). Short values are left alone:
  // replacing "p" or "error" everywhere garbles every line and tells where the value occurs.
  const secrets = redact.filter((s) => s.length >= MIN_MASKED_LENGTH);
  let buffer: OutputLine[] = [];
  let sending: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;

  const held = heldTails.getStore();
  // Signals are sent one after another so lines keep their order.
  const send = (lines: OutputLine[]): Promise<void> =>
    (sending = sending.then(() =>
      handle.signal(outputSignal, { lines }).catch((err) => {
        ctx.log.warn('could not stream output to the workflow', { error: String(err) });
      }),
    ));

  if (held) held.send = send;

  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    // Lines an earlier stream of this attempt held go first: order is kept across streams.
    const lines = [...(held?.lines.splice(0) ?? []), ...buffer];
    buffer = [];
    if (lines.length > 0) void send(lines);
  };

  return {
    line(message, status = 'processing') {
      let text = message.length > MAX_LINE_LENGTH ? `${message.slice(0, MAX_LINE_LENGTH)}…` : message;
      for (const secret of secrets) text = text.split(secret).join('********');
      buffer.push({ status, message: text });
      beat(ctx);
      if (buffer.length >= MAX_LINES_PER_BATCH) flush();
      else if (!timer) timer = setTimeout(flush, FLUSH_INTERVAL_MS);
    },
    async close() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      const chars = [...(held?.lines ?? []), ...buffer].reduce((n, l) => n + l.message.length, 0);
      if (held && chars <= MAX_TAIL_CHARS) {
        held.lines.push(...buffer);
        buffer = [];
      } else flush();
      await sending;
    },
  };
}
