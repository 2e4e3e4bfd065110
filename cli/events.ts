import { createParser } from 'eventsource-parser';
import type { EventStatus } from '../contract';
import { ApiClient, UnreachableError, isEventStream, messageOf, readBody } from './client';

/** One progress event as the stream sends it, with its `id:`. */
export interface StreamEvent {
  id?: number;
  step: string;
  status: EventStatus;
  message: string;
}

/** What the stream tells its reader: each event, and each time it has to re-attach. */
export interface StreamSink {
  /** The workflow's id, once the server has named it (header, or the first event). */
  workflow?(workflowId: string): void;
  event(e: StreamEvent): void;
  reconnecting?(attempt: number, lastEventId: number, why: string): void;
}

/** The API answered something other than a stream: its status and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(messageOf(body));
  }
}

/** A re-attach that failed in a way the next attempt may not. */
class Retry extends Error {}

export interface FollowOptions {
  signal?: AbortSignal;
  /** Re-attach attempts in a row after a dropped connection before giving up. */
  retries?: number;
  /** First wait before re-attaching; doubles up to 5 s. */
  retryDelayMs?: number;
}

export interface FollowResult {
  workflowId?: string;
  /** The server ended the stream (`event: close`): the operation has finished. */
  closed: boolean;
  last?: StreamEvent;
}

const WORKFLOW_ID = /^\[\*\] workflow id: (\S+)/;

/**
 * Reads an operation's events to the end. `first` is the answer of the request that
 * started it (an install, a start, ...); when that connection drops before `event: close`,
 * the events are asked for again with `Last-Event-ID`, so none is lost or repeated and the
 * operation, which runs in Temporal, never notices.
 */
export async function followEvents(
  client: ApiClient,
  first: Response | { workflowId: string; after?: number },
  sink: StreamSink,
  opts: FollowOptions = {},
): Promise<FollowResult> {
  const retries = opts.retries ?? 8;
  let workflowId = first instanceof Response ? (first.headers.get('x-workflow-id') ?? undefined) : first.workflowId;
  if (workflowId) sink.workflow?.(workflowId);
  let lastId = first instanceof Response ? 0 : (first.after ?? 0);
  let last: StreamEvent | undefined;
  let failures = 0;
  let response: Response | undefined = first instanceof Response ? first : undefined;

  for (;;) {
    let why: string;
    try {
      const res =
        response ??
        (await client.send('GET', `/api/workflows/${encodeURIComponent(workflowId!)}/events`, {
          headers: lastId > 0 ? { 'Last-Event-ID': String(lastId) } : {},
          signal: opts.signal,
        }));
      const reattaching = response === undefined;
      response = undefined;
      if (!isEventStream(res)) {
        const error = new ApiError(res.status, await readBody(res));
        // A server restarting behind a proxy answers 502/503 for a moment: worth another try.
        if (!reattaching || res.status < 500) throw error;
        throw new Retry(`the server answered ${res.status}: ${error.message}`);
      }
      let closed = false;
      const parser = createParser({
        onEvent(frame) {
          if (frame.event === 'close') {
            closed = true;
            return;
          }
          const e = { ...(JSON.parse(frame.data) as Omit<StreamEvent, 'id'>), ...(frame.id ? { id: Number(frame.id) } : {}) };
          if (e.id !== undefined) lastId = e.id;
          if (!workflowId) {
            const named = WORKFLOW_ID.exec(e.message)?.[1];
            if (named) {
              workflowId = named;
              sink.workflow?.(named);
            }
          }
          failures = 0;
          last = e;
          sink.event(e);
        },
      });
      const decoder = new TextDecoder();
      const reader = res.body!.getReader();
      // fetch's signal does not always reach a body already being read: cancel it here.
      const stop = () => void reader.cancel().catch(() => undefined);
      opts.signal?.addEventListener('abort', stop, { once: true });
      try {
        for (let chunk = await reader.read(); !chunk.done && !closed; chunk = await reader.read()) {
          parser.feed(decoder.decode(chunk.value, { stream: true }));
        }
      } finally {
        opts.signal?.removeEventListener('abort', stop);
        if (closed) stop();
      }
      opts.signal?.throwIfAborted();
      if (closed) return { workflowId, closed: true, last };
      why = 'the stream ended before the operation did';
    } catch (err) {
      if (opts.signal?.aborted || err instanceof ApiError) throw err;
      why =
        err instanceof UnreachableError || err instanceof Retry
          ? err.message
          : `connection lost: ${err instanceof Error ? err.message : String(err)}`;
    }
    // Without a workflow id there is nothing to re-attach to.
    if (!workflowId || ++failures > retries) return { workflowId, closed: false, last };
    sink.reconnecting?.(failures, lastId, why);
    await sleep(Math.min(5000, (opts.retryDelayMs ?? 250) * 2 ** (failures - 1)), opts.signal);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
