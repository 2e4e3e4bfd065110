import { type EventStatus, outputSignal } from '../contract';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';

export interface OutputStream {
  line(message: string, status?: EventStatus): void;
  /** Sends what is buffered and waits for it; call before the activity returns. */
  close(): Promise<void>;
}

const FLUSH_INTERVAL_MS = 1000;
const MAX_LINES_PER_BATCH = 1000;
const MAX_LINE_LENGTH = 2000;
const MIN_MASKED_LENGTH = 8;

/**
 * Streams command output into the running workflow's progress. Lines are batched into
 * one signal per second, so an init script printing thousands of lines costs a handful
 * of history events, and the SSE client still sees them within about a second.
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
  let buffer: Array<{ status: EventStatus; message: string }> = [];
  let sending: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;

  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (buffer.length === 0) return;
    const lines = buffer;
    buffer = [];
    // Signals are sent one after another so lines keep their order.
    sending = sending.then(() =>
      handle.signal(outputSignal, { lines }).catch((err) => {
        ctx.log.warn('could not stream output to the workflow', { error: String(err) });
      }),
    );
  };

  return {
    line(message, status = 'processing') {
      let text = message.length > MAX_LINE_LENGTH ? `${message.slice(0, MAX_LINE_LENGTH)}…` : message;
      for (const secret of secrets) text = text.split(secret).join('********');
      buffer.push({ status, message: text });
      ctx.heartbeat();
      if (buffer.length >= MAX_LINES_PER_BATCH) flush();
      else if (!timer) timer = setTimeout(flush, FLUSH_INTERVAL_MS);
    },
    async close() {
      flush();
      await sending;
    },
  };
}
