import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config } from './config';
import { connectTemporal, ensureSearchAttributes } from './temporal/connect';
import { temporalTls } from './temporal/tls';
import { createExecutors } from './executor';
import { createActivities } from '../activities';
import { createWorker } from '../worker/worker';
import { createApp } from '../api/app';
import { applyServerLimits } from '../api/limits';
import { EncryptionCodec, dataConverterFor } from './temporal/codec';
import { resolveEncryptionKeys } from './temporal/encryptionKeys';
import { readinessProbe, nodeCheck, temporalCheck, workerCheck } from './readiness';
import { StartupError, reason } from './startupError';
import { portHolder } from './run/ports';
import { checkNodeVersions } from './nodeVersions';
import { createLogger, type Logger } from './observability/log';
import { createMetrics, type Metrics } from './observability/metrics';

export interface ServiceOptions {
  config: Config;
  temporalAddress: string;
  /** Environment for commands run on the main node (the sandbox puts its qm first on PATH). */
  mainNodeEnv?: Record<string, string>;
  /** Reach the main node over SSH even in sandbox mode, as an off-cluster deployment does. */
  mainNodeOverSsh?: boolean;
  workflowBundlePath?: string;
  /** Listen address; the seed listened on every interface. */
  host?: string;
  /** Run the API without a worker (another process polls the task queue). */
  worker?: boolean;
  /** Default: warnings and errors as JSON on stdout. */
  logger?: Logger;
  /** Default: a registry of this service's own. */
  metrics?: Metrics;
}

export interface RunningService {
  url: string;
  client: Client;
  worker?: Worker;
  metrics: Metrics;
  stop(): Promise<void>;
}

/** Wires executors, activities, a worker and the HTTP API to one Temporal namespace. */
export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { config } = opts;
  const logger = opts.logger ?? createLogger({ level: 'warn', pretty: false });
  const metrics = opts.metrics ?? createMetrics();
  let keys: ReturnType<typeof resolveEncryptionKeys>;
  try {
    keys = resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
  } catch (err) {
    // Its messages name the setting and the entry (never key material).
    throw new StartupError(`payload encryption keys: ${reason(err)}`, undefined, { cause: err });
  }
  if (keys.created) {
    logger.warn(`created the payload encryption key file ${keys.created}: back it up, history cannot be read without it`);
  }
  const codec = new EncryptionCodec(keys);
  const dataConverter = dataConverterFor(codec);
  let temporal: Awaited<ReturnType<typeof connectTemporal>>;
  try {
    temporal = await connectTemporal({
      address: opts.temporalAddress,
      namespace: config.temporal.namespace,
      dataConverter,
      tls: temporalTls(config.temporal.tls),
    });
    await ensureSearchAttributes(temporal.connection, config.temporal.namespace);
  } catch (err) {
    throw new StartupError(
      `cannot reach Temporal at ${opts.temporalAddress} (namespace ${config.temporal.namespace}): ${reason(err).split('\n')[0]}\n` +
        'start that server, fix TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (and TEMPORAL_TLS_*), or unset TEMPORAL_ADDRESS to run the embedded dev server',
      undefined,
      { cause: err },
    );
  }

  const executors = createExecutors(
    config,
    opts.mainNodeOverSsh ? { mainNodeLocal: false } : { mainNodeEnv: opts.mainNodeEnv },
  );
  try {
    const { unreachable } = await checkNodeVersions(executors);
    for (const [node, why] of Object.entries(unreachable)) logger.warn({ node }, `node ${node}: could not read its Proxmox VE version (${why}); it is checked again at the next start`);
  } catch (err) {
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await temporal.close();
    throw err;
  }
  let worker: Worker | undefined;
  let workerDone: Promise<void> | undefined;
  if (opts.worker !== false) {
    const activities = createActivities({ config, executors, client: temporal.client, metrics });
    worker = await createWorker({
      config,
      connection: temporal.nativeConnection,
      activities,
      workflowBundlePath: opts.workflowBundlePath,
      dataConverter,
      metrics,
    });
    workerDone = worker.run();
  }

  const checks = [
    temporalCheck(temporal.client, opts.temporalAddress),
    ...(worker ? [workerCheck(worker)] : []),
    ...Object.values(executors).map(nodeCheck),
  ];
  const app = createApp({
    config,
    client: temporal.client,
    knownNodes: Object.keys(executors),
    executors,
    codec,
    readiness: readinessProbe(checks),
    metrics,
    logger,
  });
  // Node checks its header and request deadlines every connectionsCheckingInterval.
  const server = http.createServer({ connectionsCheckingInterval: 1000 }, app);
  // Deadlines for receiving requests, and JSON answers to requests Node refuses. Answers
  // have their own deadline (api/limits.ts); SSE streams are exempt from it.
  applyServerLimits(server, config.http);
  const host = opts.host ?? '0.0.0.0';
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await workerDone?.catch(() => undefined);
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await temporal.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new StartupError(`${host}:${config.port} (the API) is in use by ${portHolder(config.port)}: stop it or set PORT to a free port`);
    }
    throw err;
  }
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    client: temporal.client,
    worker,
    metrics,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (worker && worker.getState() === 'RUNNING') worker.shutdown();
      await workerDone?.catch(() => undefined);
      await Promise.all(Object.values(executors).map((e) => e.close()));
      await temporal.close();
    },
  };
}
