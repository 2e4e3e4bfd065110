import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { healthRoutes } from '../api/health';
import { routerFor } from '../api/mountRoutes';
import { readinessProbe, type ReadinessCheck } from '../lib/readiness';
import { portHolder } from '../lib/run/ports';
import { StartupError } from '../lib/startupError';
import { metricsHandler, type Metrics } from '../lib/observability/metrics';

export interface WorkerHealth {
  url: string;
  stop(): Promise<void>;
}

/**
 * A worker without the API still needs probes a supervisor can call: `/health` and
 * `/health/live` (the process answers) and `/health/ready` (Temporal, the worker's polling,
 * the nodes), and `/metrics`. Only those: nothing here starts or reads a workflow.
 */
export async function startWorkerHealth(opts: { port: number; host: string; checks: ReadinessCheck[]; metrics?: Metrics }): Promise<WorkerHealth> {
  const app = express();
  app.disable('x-powered-by');
  app.use(routerFor(healthRoutes, { readiness: readinessProbe(opts.checks), mayReadDiagnostics: () => true }, {}));
  // The worker's own figures (steps, image cache, installs): scraped here, as the API's are on its port.
  if (opts.metrics) app.get('/metrics', metricsHandler(opts.metrics.registry));
  app.use((_req, res) => {
    res.status(404).json({ success: false, message: 'a worker serves only /health, /health/live, /health/ready and /metrics' });
  });
  const server = http.createServer(app);
  const { host } = opts;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE'
          ? new StartupError(`${host}:${opts.port} (the worker's health port) is in use by ${portHolder(opts.port)}: stop it or set WORKER_HEALTH_PORT to a free port`)
          : err,
      );
    });
    server.listen(opts.port, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
