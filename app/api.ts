import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { createApp } from '../api/app';
import { applyServerLimits } from '../api/limits';
import { readinessProbe, type ReadinessCheck } from '../lib/readiness';
import { StartupError } from '../lib/startupError';
import { portHolder } from '../lib/run/ports';
import type { TemporalConnection } from './temporal';
import type { Metrics } from '../lib/observability/metrics';
import type { Logger } from '../lib/observability/log';
import type { ProgressPushes } from '../lib/progressPushes';
import type { ReaderTiming } from '../api/progressReader';

export interface RunningApi {
  url: string;
  /** Closes every connection (SSE streams included) and stops listening. */
  stop(): Promise<void>;
}

/**
 * The API role: the HTTP server on config.port, starting workflows and reading their
 * progress through the shared Temporal client. `checks` are what /api/health/ready reports.
 */
export async function startApi(opts: {
  config: Config;
  temporal: TemporalConnection;
  proxmox: ProxmoxCluster;
  /** Node names requests may name. */
  knownNodes: string[];
  checks: ReadinessCheck[];
  host: string;
  metrics?: Metrics;
  logger?: Logger;
  /** Progress the worker in this process pushes, if it runs one. */
  pushes?: ProgressPushes;
  readerTiming?: ReaderTiming;
}): Promise<RunningApi> {
  const { config, temporal, proxmox } = opts;
  const app = createApp({
    config,
    client: temporal.client,
    knownNodes: opts.knownNodes,
    proxmox,
    codec: temporal.codec,
    readiness: readinessProbe(opts.checks),
    metrics: opts.metrics,
    logger: opts.logger,
    pushes: opts.pushes,
    readerTiming: opts.readerTiming,
  });
  // Node checks its header and request deadlines every connectionsCheckingInterval.
  const server = http.createServer({ connectionsCheckingInterval: 1000 }, app);
  // Deadlines for receiving requests, and JSON answers to requests Node refuses. Answers
  // have their own deadline (api/limits.ts); SSE streams are exempt from it.
  applyServerLimits(server, config.http);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new StartupError(`${opts.host}:${config.port} (the API) is in use by ${portHolder(config.port)}: stop it or set PORT to a free port`);
    }
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
