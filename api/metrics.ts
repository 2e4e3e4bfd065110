import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { metricsHandler, type Metrics } from '../lib/observability/metrics';
import { HttpError } from './errors';
import { err } from './openapi/answer';
import { defineRoutes } from './route';
import { registeredRoutes, routeMatcher } from './routeTable';

/**
 * Counts every answer by method, route pattern and status. The route table is read on the
 * first request, once every route is registered; a path no route serves is `unmatched`.
 */
export function httpMetrics(app: Express, metrics: Metrics): RequestHandler {
  let routeOf: ReturnType<typeof routeMatcher> | undefined;
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once('close', () => {
      routeOf ??= routeMatcher(registeredRoutes(app));
      const route = routeOf(req.method, new URL(req.originalUrl, 'http://localhost').pathname) ?? 'unmatched';
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
      metrics.httpDuration.observe({ method: req.method, route }, seconds);
    });
    next();
  };
}

export interface MetricsRouteDeps {
  /** Without it there is no /metrics. */
  metrics?: Metrics;
  mayReadDiagnostics: (req: Request, res: Response) => boolean;
}

/** GET /metrics: the process's registry in Prometheus' text format. */
export const metricsRoutes = defineRoutes({
  stage: 'early',
  at: '/',
  when: (deps: MetricsRouteDeps) => deps.metrics !== undefined,
  setup: ({ metrics, mayReadDiagnostics }: MetricsRouteDeps) => ({ serve: metricsHandler(metrics!.registry), mayReadDiagnostics }),
  routes: [
    {
      method: 'GET',
      path: '/metrics',
      summary: 'Prometheus metrics, for DIAGNOSTICS_IPS (127.0.0.1, ::1), ALLOW_IPS and token holders (everyone with PUBLIC_DIAGNOSTICS=true)',
      answers: { 200: { description: 'text format 0.0.4', text: z.string() }, 403: err('another caller') },
      // Counts and timings, no VM data; still none of a stranger's business (PUBLIC_DIAGNOSTICS opens it).
      use: ({ mayReadDiagnostics }) => [
        (req, res, next) => {
          if (mayReadDiagnostics(req, res)) return next();
          next(new HttpError(403, 'metrics are served to DIAGNOSTICS_IPS, ALLOW_IPS and token holders (PUBLIC_DIAGNOSTICS=true serves everyone)'));
        },
      ],
      handle: ({ serve }, req, res) => serve(req, res),
    },
  ],
});
