import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import type { z } from 'zod';
import {
  ApplicationFailure,
  CancelledFailure,
  TerminatedFailure,
  TimeoutFailure,
  WorkflowFailedError,
} from '@temporalio/client';
import { failureStatus, unwrapFailure } from '../contract';
import { describeIssues } from './issues';
import type { Logger } from '../lib/observability/log';

/**
 * The one way a route refuses or fails a request: throw an HttpError (Express 5 hands a
 * rejected handler to errorMiddleware), which answers `{ success: false, message, ...extra }`.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Fields of the JSON answer besides `success` and `message` (`type`, `workflowId`, ...). */
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/**
 * A value the client sent breaks a rule: 400 (or another 4xx such as 415), with the
 * message naming the field. Every "please check your input" answer is made here.
 */
export class InvalidRequestError extends HttpError {
  override readonly name = 'InvalidRequestError';
  constructor(
    /** `<field>: <rule>`, without the prefix. */
    readonly problem: string,
    status = 400,
  ) {
    super(status, `please check your input: ${problem}`);
  }
}

/** `raw` (a body or query; absent reads as `{}`) checked against `schema`, or an InvalidRequestError naming every bad field. */
export function parseInput<T>(schema: z.ZodType<T>, raw: unknown): T {
  const input = raw ?? {};
  const parsed = schema.safeParse(input, { reportInput: true });
  if (!parsed.success) throw new InvalidRequestError(describeIssues(parsed.error, input));
  return parsed.data;
}

/** What a failed workflow means for an HTTP client: the status of its failure type and the reason. */
export function workflowFailure(err: unknown, extra: Record<string, unknown> = {}): HttpError {
  const cause = unwrapFailure(err instanceof WorkflowFailedError ? err.cause : err);
  if (cause instanceof CancelledFailure) return new HttpError(409, 'the operation was cancelled', { type: 'Cancelled', ...extra });
  if (cause instanceof TerminatedFailure) return new HttpError(500, 'the operation was terminated', { type: 'Terminated', ...extra });
  if (cause instanceof TimeoutFailure) return new HttpError(504, 'the operation timed out', { type: 'Timeout', ...extra });
  if (cause instanceof ApplicationFailure) {
    const type = cause.type ?? undefined;
    return new HttpError(failureStatus(type), cause.message, { type, ...extra });
  }
  return new HttpError(500, err instanceof Error ? err.message : String(err), { type: undefined, ...extra });
}

/** Errors of express.json and of its verify hook (api/limits.ts), as HttpErrors. */
function bodyError(err: Error & { type?: string; limit?: number }): HttpError | undefined {
  if (err.type === 'entity.parse.failed') return new InvalidRequestError('body is not valid JSON');
  if (err.type === 'entity.too.large') return new InvalidRequestError(`body is larger than ${(err.limit ?? 0) / 1024} KiB`, 413);
  if (err.type === 'qemurun.charset') return new InvalidRequestError(err.message, 415);
  if (err.type?.startsWith('qemurun.')) return new InvalidRequestError(err.message);
  return undefined;
}

/**
 * The API's one error middleware: an HttpError as its JSON answer; a malformed, oversized or
 * non-UTF-8 body as a 4xx naming the problem; anything unexpected as a 500 that is logged
 * (to `logger`, default stderr) and says no more than "internal error".
 */
export function errorMiddleware(logger?: Logger): ErrorRequestHandler {
  return (err: Error & { status?: number; type?: string }, req: Request, res: Response, _next: NextFunction): void => {
    if (res.headersSent) {
      res.end();
      return;
    }
    const known =
      err instanceof HttpError
        ? err
        : (bodyError(err) ?? (err.status && err.status >= 400 && err.status < 500 ? new HttpError(err.status, err.message) : undefined));
    if (!known) {
      if (logger) logger.error({ err, method: req.method, path: req.path }, 'request failed');
      else console.error('request failed:', err);
      res.status(500).json({ success: false, message: 'internal error' });
      return;
    }
    res.status(known.status).set(known.headers).json({ success: false, message: known.message, ...known.extra });
  };
}
