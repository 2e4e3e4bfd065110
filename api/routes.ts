import type { Request, Response } from 'express';
import type { Logger } from '../lib/observability/log';
import type { AppDeps } from './app';
import type { RouteGroup } from './route';
import type { Streams } from './sse';
import { metricsRoutes } from './metrics';
import { codecRoutes } from './codec';
import { healthRoutes } from './health';
import { openApiRoutes } from './openapi/route';
import { whoamiRoutes } from './whoami';
import { installRoutes } from './install';
import { listRoutes } from './list';
import { addressPoolRoutes } from './addressPools';
import { templateRoutes } from './templates';
import { vmRoutes } from './vm/routes';
import { vmRunRoutes } from './vm/runs';
import { installTimeRoutes } from './installTimes';
import { clusterRoutes } from './cluster';
import { rebuildRoutes } from './rebuild';
import { scheduleRoutes } from './schedules/routes';
import { reconcileRoutes } from './reconcile';
import { workflowRouteGroup } from './workflows';
import { initScriptRoutes } from './initScripts';

/** What createApp hands every route group's `setup`: its dependencies and what it built from them. */
export interface RouteContext extends Omit<AppDeps, 'logger'> {
  streams: Streams;
  /** What the VM operations and the workflow routes report: deps.logger, or warnings to stdout. */
  logger: Logger;
  /** deps.logger as given: where unexpected failures are logged (stderr without one). */
  errorLogger?: Logger;
  mayReadDiagnostics: (req: Request, res: Response) => boolean;
  openApiDocument: (version: string) => Record<string, unknown>;
}

/**
 * Every route the service serves, group by group: createApp mounts them (each in its
 * group's stage, in this order, which is the order Express tries them), the OpenAPI
 * document describes them, and the metrics label requests by their patterns. The order
 * matters where patterns overlap: `GET /api/vm/:id/status` is tried before
 * `GET /api/vm/install/:workflowId`, as it always was.
 */
export const ROUTE_GROUPS: ReadonlyArray<RouteGroup<RouteContext>> = [
  metricsRoutes,
  codecRoutes,
  healthRoutes,
  openApiRoutes,
  whoamiRoutes,
  installRoutes,
  listRoutes,
  addressPoolRoutes,
  templateRoutes,
  vmRoutes,
  vmRunRoutes,
  installTimeRoutes,
  clusterRoutes,
  rebuildRoutes,
  scheduleRoutes,
  reconcileRoutes,
  workflowRouteGroup,
  initScriptRoutes,
];
