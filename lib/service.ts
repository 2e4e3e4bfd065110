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
import { startHealthServer } from '../worker/healthServer';

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
  /** Run the worker without the API: only a health port (config.worker.healthPort) answers. */
  api?: boolean;
}

export interface RunningService {
  /** The API's address, or with `api: false` the worker's health port. */
  url: string;
  client: Client;
  worker?: Worker;
  stop(): Promise<void>;
}

/** Wires executors, activities, a worker and the HTTP API to one Temporal namespace. */
export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { config } = opts;
  let keys: ReturnType<typeof resolveEncryptionKeys>;
  try {
    keys = resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
  } catch (err) {
    // Its messages name the setting and the entry (never key material).
    throw new StartupError(`payload encryption keys: ${reason(err)}`, undefined, { cause: err });
  }
  if (keys.created) {
    console.warn(`created the payload encryption key file ${keys.created}: back it up, history cannot be read without it`);
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
  let worker: Worker | undefined;
  let workerDone: Promise<void> | undefined;
  if (opts.worker !== false) {
    const activities = createActivities({ config, executors, client: temporal.client });
    worker = await createWorker({
      config,
      connection: temporal.nativeConnection,
      activities,
      workflowBundlePath: opts.workflowBundlePath,
      dataConverter,
    });
    workerDone = worker.run();
  }

  /** Stops the worker (within its grace time), then closes node connections and Temporal. */
  const releaseAll = async () => {
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await workerDone?.catch(() => undefined);
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await temporal.close();
  };

  // Replicas of the API share one cluster: a node that is down is not a reason to take
  // one replica out of a load balancer, so the API alone checks only Temporal.
  const checks = [
    temporalCheck(temporal.client, opts.temporalAddress),
    ...(worker ? [workerCheck(worker)] : []),
    ...(worker ? Object.values(executors).map(nodeCheck) : []),
  ];
  if (opts.api === false) {
    let health: Awaited<ReturnType<typeof startHealthServer>>;
    try {
      health = await startHealthServer({ port: config.worker.healthPort, host: opts.host, readiness: readinessProbe(checks) });
    } catch (err) {
      await releaseAll();
      throw err;
    }
    return {
      url: health.url,
      client: temporal.client,
      worker,
      async stop() {
        await health.stop();
        await releaseAll();
      },
    };
  }

  const app = createApp({
    config,
    client: temporal.client,
    knownNodes: Object.keys(executors),
    executors,
    codec,
    readiness: readinessProbe(checks),
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
    await releaseAll();
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
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await releaseAll();
    },
  };
}
