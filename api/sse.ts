import type { NextFunction, Request, Response } from 'express';
import type { WorkflowHandle } from '@temporalio/client';
import type { ProgressEvent } from '../contract';
import type { ProgressReaders } from './progressReader';
import type { SseLimiter } from './limits';
import { answerHeldOpen } from './limits';
import { InvalidRequestError } from './errors';

const KEEPALIVE_MS = 15_000;

/**
 * What the routes that answer with event streams share within one app: made once by
 * createApp and handed to each, so two apps in one process (tests, a second listener)
 * never share progress readers or stream counts.
 */
export interface Streams {
  /** One progress reader per workflow streamed by this app. */
  readers: ProgressReaders;
  /** The caps on open streams: `limitsFor` admits by them, `answerHeldOpen` counts against them. */
  limiter: SseLimiter;
}

export function openEventStream(res: Response, workflowId: string, limiter: SseLimiter | undefined): void {
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
    'X-Workflow-Id': workflowId,
  });
  answerHeldOpen(res, limiter);
  res.flushHeaders();
}

function writeEvent(res: Response, e: Pick<ProgressEvent, 'step' | 'status' | 'message'> & { seq?: number }): void {
  const id = e.seq === undefined ? '' : `id: ${e.seq}\n`;
  // JSON.stringify escapes quotes and newlines, so a message can never break the frame.
  res.write(`${id}data: ${JSON.stringify({ step: e.step, status: e.status, message: e.message })}\n\n`);
}

function closeEventStream(res: Response): void {
  res.write('event: close\ndata: {}\n\n');
  res.end();
}

/** An event id; empty means none, as EventSource sends before its first event. */
const EVENT_ID = /^(\d{1,15})?$/;

/**
 * For `.../events` requests: a `Last-Event-ID` header or `?after=` that is not an event id
 * (a non-negative integer) gets a 400 naming it, instead of silently replaying from the start.
 */
export function checkResumePoint(req: Request, res: Response, next: NextFunction): void {
  if (!/\/events\/?$/i.test(req.path)) return next();
  const header = req.get('Last-Event-ID');
  const after = req.query.after;
  const problem =
    header !== undefined && !EVENT_ID.test(header.trim())
      ? 'Last-Event-ID: must be the id of an event (a non-negative integer)'
      : after !== undefined && (typeof after !== 'string' || !EVENT_ID.test(after))
        ? 'after: must be the id of an event (a non-negative integer)'
        : undefined;
  next(problem ? new InvalidRequestError(problem) : undefined);
}

/** The sequence number a reconnecting client has seen (Last-Event-ID header or ?after=). */
export function lastEventId(req: Request): number {
  const raw = req.get('Last-Event-ID') ?? (typeof req.query.after === 'string' ? req.query.after : undefined);
  const n = raw === undefined ? 0 : Number(raw);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * Streams a workflow's progress events after `after` until the workflow is closed and
 * every event has been sent. The events come from the workflow's shared reader (see
 * progressReader.ts), so a stream adds no reads of its own; a client that goes away only
 * leaves the reader, never stops the workflow.
 */
export async function streamProgress(
  readers: ProgressReaders,
  req: Request,
  res: Response,
  handle: WorkflowHandle,
  after: number,
): Promise<void> {
  // A handle from starting the workflow names its run: the reader need not look it up.
  const runId = 'firstExecutionRunId' in handle && typeof handle.firstExecutionRunId === 'string' ? handle.firstExecutionRunId : undefined;
  const reader = readers.reader(handle.workflowId, runId);
  let cursor = after;
  let wake: (() => void) | undefined;
  const leave = reader.watch(() => wake?.());
  // The response's 'close', not the request's: a request whose body was read (a POST)
  // has already emitted 'close', and would never tell that the client went away.
  let gone = res.closed || res.destroyed;
  res.on('close', () => {
    gone = true;
    wake?.();
  });
  let lastWrite = Date.now();
  let reportedStall: number | undefined;

  try {
    while (!gone) {
      for (const e of reader.eventsAfter(cursor)) {
        writeEvent(res, e);
        cursor = e.seq;
        lastWrite = Date.now();
      }
      if (reader.end === 'not-found') {
        writeEvent(res, { step: 'workflow', status: 'error', message: `[-] workflow ${handle.workflowId} not found` });
        break;
      }
      if (reader.end === 'closed' && cursor >= reader.lastSeq) break;
      const stalledSince = reader.stalledSince;
      if (Date.now() - lastWrite > KEEPALIVE_MS || (stalledSince !== undefined && reportedStall !== stalledSince)) {
        // No worker polling (restarting, deploying): the install itself is safe in Temporal.
        res.write(stalledSince === undefined ? ': keepalive\n\n' : `: waiting for a worker since ${new Date(stalledSince).toISOString()}\n\n`);
        reportedStall = stalledSince;
        lastWrite = Date.now();
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, KEEPALIVE_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    leave();
  }
  if (!gone) closeEventStream(res);
}
