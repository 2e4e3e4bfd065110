import { Router, type RequestHandler } from 'express';
import type { Role } from '../lib/apiTokens';
import { limitsFor, type SseLimiter } from './limits';
import { joinPath, mountPoints, type RouteGroup } from './route';
import type { RegisteredRoute } from './routeTable';

export interface MountOptions {
  /** What a route's `role` puts after its limits: requireRole, or a server's own check. */
  guard?(role: Role): RequestHandler;
  /** The stream caps a route's `limits.stream` admits by. */
  limiter?: SseLimiter;
  /** Every route registered, in the order Express tries them (the metrics' labels). */
  registered?: RegisteredRoute[];
}

/**
 * The group's router: each route as `limits, guard, use, handle`, at its path relative to
 * where the router is mounted. One router for all of a group's mount points, as their
 * handlers share one `setup`.
 */
export function routerFor<D, S>(group: RouteGroup<D, S>, deps: D, opts: MountOptions): Router {
  const s = group.setup(deps);
  const guardFor = (role: Role): RequestHandler => {
    if (!opts.guard) throw new Error(`a route needs the ${role} role, and this server has no guard`);
    return opts.guard(role);
  };
  // A group mounted under a pattern (`/api/workflows/:workflowId`) reads that parameter.
  const router = Router({ mergeParams: mountPoints(group).some((at) => at.includes(':')) });
  group.around?.before?.(router, s);
  for (const route of group.routes) {
    const handlers: RequestHandler[] = [
      ...limitsFor(route.limits, opts.limiter),
      ...(route.role ? [guardFor(route.role)] : []),
      ...(route.use?.(s) ?? []),
      (req, res, next) => route.handle(s, req, res, next) as void,
    ];
    const method = route.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete';
    router[method](route.path, ...handlers);
  }
  group.around?.after?.(router, s);
  return router;
}

/** Mounts a group on `parent`, which serves the paths under `parentPath` (`/api`, or `` for the app). */
export function mountGroup<D, S>(parent: Router, parentPath: string, group: RouteGroup<D, S>, deps: D, opts: MountOptions): void {
  if (group.when && !group.when(deps)) return;
  const router = routerFor(group, deps, opts);
  for (const at of mountPoints(group)) {
    const relative = joinPath('/', at.slice(parentPath.length));
    if (joinPath(parentPath, relative) !== joinPath('/', at)) throw new Error(`route group at ${at} cannot be mounted under ${parentPath || '/'}`);
    if (relative === '/') parent.use(router);
    else parent.use(relative, router);
    for (const route of group.routes) opts.registered?.push({ method: route.method, path: joinPath(at, route.path) });
  }
}
