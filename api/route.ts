import type { NextFunction, Request, Response, RequestHandler, Router } from 'express';
import type { z } from 'zod';
import type { Role } from '../lib/apiTokens';
import type { RouteLimits } from './limits';
import type { Answer, HeaderName } from './openapi/answer';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/**
 * One route, declared once: Express's routing (api/mountRoutes.ts), the OpenAPI document
 * (api/openapi/document.ts) and the metrics' route labels (api/routeTable.ts) are all read
 * from it. `S` is what its group's `setup` made for this app: services, caches, settings.
 */
export interface RouteSpec<S> {
  method: Method;
  /** Express pattern under the group's `at`: `/vm/:id/status`. */
  path: string;
  summary: string;
  /**
   * `operate` and `admin` (and `read` outside /api): the route is guarded by that role
   * (an allowed address and, when tokens are configured, a token of that role or above).
   * Undefined under /api: a read, which the API's read check covers; elsewhere, open.
   */
  role?: Role;
  /** The request body's schema, for the document; the handler validates with the same one. */
  body?: z.ZodType;
  query?: Record<string, { schema: z.ZodType; description: string }>;
  headers?: HeaderName[];
  answers: Record<number, Answer>;
  /** Applied first, before the role guard: a stream slot, or a longer deadline. */
  limits?: RouteLimits;
  /** Middleware between the role guard and the handler (a body parser of its own, a check). */
  use?(s: S): RequestHandler[];
  handle(s: S, req: Request, res: Response, next: NextFunction): unknown;
}

/**
 * Where a group is mounted, in the order createApp (api/app.ts) builds the app:
 * - `early`: on the app before CORS and the API's JSON parser (metrics, the codec server);
 * - `open`: under /api before the read check (health, this document);
 * - `api`: under /api after it;
 * - `late`: on the app after /api (the init scripts).
 */
export type Stage = 'early' | 'open' | 'api' | 'late';

/** The routes of one file: mounted together on one router of their own, in this order. */
export interface RouteGroup<D, S = unknown> {
  stage: Stage;
  /** Full path(s) the group's router is mounted at: `/api`, or one router at several places. */
  at: string | readonly string[];
  /** Mount the group only when this holds (an optional dependency is there). */
  when?(deps: D): boolean;
  /** Once per app: what the handlers share. */
  setup(deps: D): S;
  /** Middleware of the group's router around its routes (its own CORS, its own error answers). */
  around?: { before?(router: Router, s: S): void; after?(router: Router, s: S): void };
  routes: ReadonlyArray<RouteSpec<S>>;
}

/** Types a group: `S` is inferred from `setup`, and each `handle` receives it. */
export function defineRoutes<D, S>(group: RouteGroup<D, S>): RouteGroup<D, S> {
  return group;
}

export const mountPoints = (group: RouteGroup<never, unknown>): readonly string[] => (typeof group.at === 'string' ? [group.at] : group.at);

/** `/api` + `/vm/list`; `/api/workflows/:workflowId` + `/` is the base itself. */
export function joinPath(base: string, path: string): string {
  const joined = `${base}/${path}`.replace(/\/+/g, '/');
  return joined.length > 1 ? joined.replace(/\/$/, '') : joined;
}
