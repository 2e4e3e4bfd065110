import type { Express } from 'express';
import { match, type MatchFunction } from 'path-to-regexp';

export interface RegisteredRoute {
  method: string;
  /** The full pattern as registered, `/api/vm/status/:vmid`. */
  path: string;
}

interface Layer {
  rawPath?: string | string[] | RegExp;
  route?: { path: string; methods: Record<string, boolean>; stack: Layer[] };
  handle?: { stack?: Layer[] };
}

/**
 * Every route the app serves, walked out of express's router (routers mounted with
 * `use(path, router)` included): what the route-labelled metrics and the OpenAPI
 * document's completeness test both need.
 *
 * Not public API: Express 5 has no way to list its routes, so this reads the `router`
 * package's layer stack (`app.router.stack`, each layer's `route` or mounted `handle`).
 * Registering every route through a table of our own instead would duplicate what the
 * route files say. An Express whose layers look different yields no routes, which the
 * OpenAPI completeness test (test/e2e/openapi.test.ts) reports.
 */
export function registeredRoutes(app: Express): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      const raw = typeof layer.rawPath === 'string' ? layer.rawPath : undefined;
      if (layer.route) {
        const path = joinPath(prefix, layer.route.path);
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (on && method !== '_all') routes.push({ method: method.toUpperCase(), path });
        }
      } else if (layer.handle?.stack && raw !== undefined) {
        walk(layer.handle.stack, joinPath(prefix, raw));
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return routes;
}

function joinPath(prefix: string, path: string): string {
  const joined = `${prefix}/${path}`.replace(/\/+/g, '/');
  return joined.length > 1 ? joined.replace(/\/$/, '') : joined;
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
