import express from 'express';
import type { ReadinessReport } from '../lib/readiness';

/**
 * `/health` and `/health/live`: liveness, answered by the HTTP server alone (a supervisor
 * restarts the process only when this fails). `/health/ready`: readiness, 503 naming the
 * dependency that is down (Temporal, the worker, a node), for load balancers and for
 * waiting on a start-up. The report names nodes, addresses and errors: a caller that
 * `mayDetail` refuses gets the verdict alone (the status code is what a probe reads).
 */
export function healthRoutes(
  readiness?: () => Promise<ReadinessReport>,
  mayDetail: (req: express.Request, res: express.Response) => boolean = () => true,
): express.Router {
  const router = express.Router();
  const live = (_req: express.Request, res: express.Response) => {
    res.type('text/plain').send('ok');
  };
  router.get('/health', live);
  router.get('/health/live', live);
  router.get('/health/ready', async (req, res) => {
    const report = readiness ? await readiness() : { ready: true, checks: {} };
    res.status(report.ready ? 200 : 503).json(mayDetail(req, res) ? report : { ready: report.ready });
  });
  return router;
}
