import type { Express, RequestHandler } from 'express';
import { metricsHandler, type Metrics } from '../lib/observability/metrics';
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

/** GET /metrics: the process's registry in Prometheus' text format. */
export function metricsRoute(metrics: Metrics): RequestHandler {
  const handler = metricsHandler(metrics.registry);
  return (req, res) => handler(req, res);
}
