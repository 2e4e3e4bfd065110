import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { healthRoutes } from '../api/health';
import { readinessProbe, type ReadinessCheck } from '../lib/readiness';
import { portHolder } from '../lib/run/ports';
import { StartupError } from '../lib/startupError';

export interface WorkerHealth {
  url: string;
  stop(): Promise<void>;
}

/**
 * A worker without the API still needs probes a supervisor can call: `/health` and
 * `/health/live` (the process answers) and `/health/ready` (Temporal, the worker's polling,
 * the nodes). Only those: nothing here starts or reads a workflow.
 */
export async function startWorkerHealth(opts: { port: number; host: string; checks: ReadinessCheck[] }): Promise<WorkerHealth> {
  const app = express();
  app.disable('x-powered-by');
  app.use(healthRoutes(readinessProbe(opts.checks)));
  app.use((_req, res) => {
    res.status(404).json({ success: false, message: 'a worker serves only /health, /health/live and /health/ready' });
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
