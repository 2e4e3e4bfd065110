import type { z } from 'zod';
import { errorBody } from './responses';

/** One answer a route documents: its description and what its body is. */
export interface Answer {
  description: string;
  json?: z.ZodType;
  text?: z.ZodType;
  /** `text/event-stream` of ProgressEvent. */
  events?: boolean;
  headers?: Record<string, string>;
}

/** The request headers that change what a route does; api/openapi/document.ts describes each. */
export type HeaderName = 'Idempotency-Key' | 'Last-Event-ID' | 'Prefer';

/** An error answer: `{ success: false, message }`. */
export const err = (description: string): Answer => ({ description, json: errorBody });

/** The event stream of an operation's workflow, named by `X-Workflow-Id`. */
export const stream = (description: string): Answer => ({ description, events: true, headers: { 'X-Workflow-Id': 'the workflow id of the operation' } });

/** Another tenant's VM answers as one nobody uses (docs/security.md, Tenants). */
export const NO_SUCH_VM = "no such VM, or another tenant's";
