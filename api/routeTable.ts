import type { Express } from 'express';
import { match, type MatchFunction } from 'path-to-regexp';

export interface RegisteredRoute {
  method: string;
  /** The full pattern as registered, `/api/vm/status/:vmid`. */
  path: string;
}

/** Where the app keeps them: its `locals`, Express's place for what lives as long as the app. */
const ROUTES = 'registeredRoutes';

/** Kept by createApp (api/app.ts), filled as it mounts each route of the table (api/routes.ts). */
export function noteRegisteredRoutes(app: Express, routes: readonly RegisteredRoute[]): void {
  app.locals[ROUTES] = routes;
}

/**
 * Every route the app serves, in the order Express tries them: what the route-labelled
 * metrics and the OpenAPI document's completeness test both need. Recorded when the routes
 * were mounted from their declarations, not read back from Express, which has no public
 * way to list them.
 */
export function registeredRoutes(app: Express): RegisteredRoute[] {
  return [...((app.locals[ROUTES] as readonly RegisteredRoute[] | undefined) ?? [])];
}

/**
 * Finds the registered pattern a request path belongs to, so that metrics are labelled by
 * `/api/vm/status/:vmid` and not by every VMID ever asked for.
 */
export function routeMatcher(routes: RegisteredRoute[]): (method: string, path: string) => string | undefined {
  const compiled: Array<{ method: string; path: string; test: MatchFunction<object> }> = routes.map((r) => ({
    ...r,
    test: match(r.path, { decode: false }),
  }));
  return (method, path) => {
    const m = method === 'HEAD' ? 'GET' : method;
    return compiled.find((r) => r.method === m && r.test(path) !== false)?.path;
  };
}
