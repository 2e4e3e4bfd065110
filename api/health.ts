import type express from 'express';
import type { ReadinessReport } from '../lib/readiness';
import * as answers from './openapi/responses';
import { defineRoutes } from './route';

/**
 * `/health` and `/health/live`: liveness, answered by the HTTP server alone (a supervisor
 * restarts the process only when this fails). `/health/ready`: readiness, 503 naming the
 * dependency that is down (Temporal, the worker, a node), for load balancers and for
 * waiting on a start-up. The report names nodes, addresses and errors: a caller that
 * `mayReadDiagnostics` refuses gets the verdict alone (the status code is what a probe reads).
 */
export interface HealthRouteDeps {
  /** Without it the API reports itself ready. */
  readiness?: () => Promise<ReadinessReport>;
  mayReadDiagnostics: (req: express.Request, res: express.Response) => boolean;
}

const live = (_s: unknown, _req: express.Request, res: express.Response) => {
  res.type('text/plain').send('ok');
};
const liveness = { summary: 'Liveness', answers: { 200: { description: 'the process answers', text: answers.okText } } };

export const healthRoutes = defineRoutes({
  stage: 'open',
  at: '/api',
  setup: (deps: HealthRouteDeps) => deps,
  routes: [
    { method: 'GET', path: '/health', ...liveness, handle: live },
    { method: 'GET', path: '/health/live', ...liveness, handle: live },
    {
      method: 'GET',
      path: '/health/ready',
      summary: 'Readiness: Temporal, the worker and every node (the checks only for DIAGNOSTICS_IPS (127.0.0.1, ::1), ALLOW_IPS and token holders)',
      answers: { 200: { description: 'ready', json: answers.readiness }, 503: { description: 'not ready; names what is down', json: answers.readiness } },
      handle: async ({ readiness, mayReadDiagnostics }, req, res) => {
        const report = readiness ? await readiness() : { ready: true, checks: {} };
        res.status(report.ready ? 200 : 503).json(mayReadDiagnostics(req, res) ? report : { ready: report.ready });
      },
    },
  ],
});
