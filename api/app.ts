import express, { NextFunction, Request, Response } from 'express';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { PayloadCodec } from '@temporalio/common';
import { cors, diagnosticsReaders, principalOf, readAccess, requireRole } from './guard';
import { hasBody, isMutating, refuseCrossSite } from './crossSite';
import { requestTimeout, sseLimiter, verifyJsonBody } from './limits';
import { checkResumePoint } from './sse';
import { errorMiddleware, HttpError, InvalidRequestError } from './errors';
import type { ReadinessReport } from '../lib/readiness';
import type { Metrics } from '../lib/observability/metrics';
import { createLogger, type Logger } from '../lib/observability/log';
import { httpMetrics } from './metrics';
import { openApiDocument } from './openapi/document';
import { consoleFiles } from './console';
import { ROUTE_GROUPS, type RouteContext } from './routes';
import type { Stage } from './route';
import { mountGroup, type MountOptions } from './mountRoutes';
import { noteRegisteredRoutes, type RegisteredRoute } from './routeTable';
import type { ProxmoxCluster } from '../lib/proxmox';
import type { ProgressPushes } from '../lib/progressPushes';
import { ProgressReaders, type ReaderTiming } from './progressReader';
import type { Streams } from './sse';

export interface AppDeps {
  config: Config;
  client: Client;
  /** Node names of the cluster, for validating `node` in requests. */
  knownNodes: string[];
  /** Serves /codec/decode (for display, secrets redacted) to the Temporal UI and CLI. */
  codec?: PayloadCodec;
  /** The cluster's nodes: the API's fast reads (preconditions, /vm/list) go through them. */
  proxmox: ProxmoxCluster;
  /** The subnets CORS admits reading origins from; default: the server's own (tests inject their own). */
  corsSubnets?: Array<{ address: string; bits: number }>;
  /** Answers /api/health/ready; without it the API reports itself ready. */
  readiness?: () => Promise<ReadinessReport>;
  /** Counts requests and serves GET /metrics; without it there is no /metrics. */
  metrics?: Metrics;
  /**
   * Where unexpected request failures are logged (default stderr), and what the VM
   * operations and the workflow routes report (default warnings to stdout, as the
   * service's own logger).
   */
  logger?: Logger;
  /** Progress pushed by the worker of this process (role all); without it streams only query. */
  pushes?: ProgressPushes;
  /** How often progress readers query; default DEFAULT_TIMING (tests slow it to prove pushes). */
  readerTiming?: ReaderTiming;
}

/** A body in another format is refused outright instead of being read as "no fields". */
function requireJsonBody(req: Request, _res: Response, next: NextFunction) {
  next(hasBody(req) && !req.is('application/json') ? new InvalidRequestError('Content-Type must be application/json', 415) : undefined);
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // req.ip (api/guard.ts clientIp) believes X-Forwarded-For from these addresses only.
  app.set('trust proxy', deps.config.trustedProxies);
  const mayReadDiagnostics = diagnosticsReaders(deps.config);
  if (deps.metrics) app.use(httpMetrics(app, deps.metrics));
  // First of all: a deadline for every answer but event streams. The cap on streams is
  // applied by each streaming route (limitsFor in api/limits.ts) and counted here.
  const limits = deps.config.http ?? { requestTimeoutMs: 30_000, sseMaxPerClient: 20, sseMaxTotal: 100, sseMaxAnonymous: 50 };
  app.use(requestTimeout(limits.requestTimeoutMs));
  const sse = sseLimiter({
    maxPerClient: limits.sseMaxPerClient,
    maxTotal: limits.sseMaxTotal,
    maxAnonymous: limits.sseMaxAnonymous,
    // A watcher with no token; the stream of an install (or any change) is never one.
    isAnonymous: (req, res) => !isMutating(req.method) && typeof principalOf(req, res, deps.config) !== 'object',
    // A token used from several addresses still holds SSE_MAX_PER_CLIENT streams at most.
    tokenOf: (req, res) => {
      const p = principalOf(req, res, deps.config);
      return typeof p === 'object' ? p.name : undefined;
    },
  });
  const streams: Streams = { readers: new ProgressReaders(deps.client.workflow, deps.readerTiming, deps.pushes), limiter: sse };
  if (deps.metrics) deps.metrics.countOpenStreams(() => sse.openTotal());

  // Every route comes from the table (api/routes.ts), each group mounted at its stage below.
  const context: RouteContext = {
    ...deps,
    streams,
    logger: deps.logger ?? createLogger({ level: 'warn', pretty: false }),
    errorLogger: deps.logger,
    mayReadDiagnostics,
    openApiDocument,
  };
  const registered: RegisteredRoute[] = [];
  const mounting: MountOptions = { guard: (role) => requireRole(deps.config, role), limiter: sse, registered };
  const mountStage = (stage: Stage, parent: express.Router, parentPath: string) => {
    for (const group of ROUTE_GROUPS) if (group.stage === stage) mountGroup(parent, parentPath, group, context, mounting);
  };
  noteRegisteredRoutes(app, registered);

  // Before the API's CORS and body limit: /metrics, and the codec server, which the Temporal
  // UI (another origin, e.g. localhost:8233) posts whole history pages to.
  mountStage('early', app, '');
  app.use(cors(deps.config, deps.corsSubnets));
  app.use(refuseCrossSite(deps.config.allowOrigins));
  app.use(checkResumePoint);
  app.use(requireJsonBody);
  app.use(express.json({ limit: '64kb', verify: verifyJsonBody }));

  const api = express.Router();
  mountStage('open', api, '/api');
  // Everything after this needs a token when ANONYMOUS_ACCESS=none; a wrong token is 401 anywhere.
  api.use(readAccess(deps.config));
  mountStage('api', api, '/api');
  app.use('/api', api);
  mountStage('late', app, '');
  // Last before the 404: only a request no route took costs a look in the console's folder.
  app.use(consoleFiles());

  app.use(() => {
    throw new HttpError(404, 'not found');
  });
  app.use(errorMiddleware(deps.logger));
  return app;
}
