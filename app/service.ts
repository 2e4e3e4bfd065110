import type { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { createExecutors, Spawner } from '../lib/executor';
import { connectCluster } from '../lib/proxmox';
import { apiCheck, nodeCheck, temporalCheck, workerCheck } from '../lib/readiness';
import { clusterNodes } from './proxmox';
import { connectService } from './temporal';
import { startWorker, type RunningWorker } from './worker';
import { startApi } from './api';
import { ensureReconcileSchedule } from './reconcileSchedule';
import { ensureTemplateSchedules } from './templateSchedules';
import { bindRebuildScheduleTypes } from './rebuildSchedules';
import { resealLegacyMarkers } from '../lib/vm/reseal';
import { reason } from '../lib/startupError';
import { checkNodeVersions, describeNodeVersions } from '../lib/nodeVersions';
import type { PveVersion } from '../lib/proxmox/pvesh';
import { createLogger, type Logger } from '../lib/observability/log';
import { createMetrics, type Metrics } from '../lib/observability/metrics';
import { startWorkerHealth } from './workerHealth';
import { ProgressPushes } from '../lib/progressPushes';
import type { ReaderTiming } from '../api/progressReader';

export interface ServiceOptions {
  config: Config;
  temporalAddress: string;
  /** Environment for commands run on the main node (the sandbox puts its qm first on PATH). */
  mainNodeEnv?: Record<string, string>;
  /** Reach the main node over SSH even in sandbox mode, as an off-cluster deployment does. */
  mainNodeOverSsh?: boolean;
  workflowBundlePath?: string;
  /** Listen address, instead of API_HOST (loopback by default; the seed listened on every interface). */
  host?: string;
  /** Run the API without a worker (another process polls the task queue). */
  worker?: boolean;
  /** Default: warnings and errors as JSON on stdout. */
  logger?: Logger;
  /** Default: a registry of this service's own. */
  metrics?: Metrics;
  /** Run the worker without the API: only a health port (config.worker.healthPort) answers. */
  api?: boolean;
  /** How often the API's progress readers query; default theirs (tests slow it to prove pushes). */
  readerTiming?: ReaderTiming;
  /** Starts local commands; default one of this service's own (tests share one per process). */
  spawner?: Spawner;
}

export interface RunningService {
  /** The API's address, or with `api: false` the worker's health port. */
  url: string;
  client: Client;
  worker?: Worker;
  metrics: Metrics;
  /** The Proxmox VE release of each node that answered at start-up. */
  nodeVersions: Record<string, PveVersion>;
  stop(): Promise<void>;
}

/**
 * The composition root: one Temporal connection and one way to the cluster (an executor
 * per node, or the REST API), shared by the worker (startWorker in ./worker) and the HTTP
 * API (startApi in ./api). A process of one role runs one of them: the API alone, or the
 * worker with its health port (./workerHealth).
 */
export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { config } = opts;
  const logger = opts.logger ?? createLogger({ level: 'warn', pretty: false });
  const metrics = opts.metrics ?? createMetrics();
  const temporal = await connectService(config, opts.temporalAddress, logger);
  // Not fatal: installs work without it, and the next start tries again.
  await ensureReconcileSchedule(temporal.client, config).catch((err: unknown) => {
    logger.warn(`the reconcile schedule could not be set up: ${reason(err).split('\n')[0]}`);
  });
  // The template refreshes TEMPLATES asks for; not fatal either: an install then takes the image.
  await ensureTemplateSchedules(temporal.client, config).catch((err: unknown) => {
    logger.warn(`the template schedules could not be set up: ${reason(err).split('\n')[0]}`);
  });
  // Rebuild schedules saved by an older version lack their input's workflow type. Not fatal either.
  await bindRebuildScheduleTypes(temporal.client, config, logger).catch((err: unknown) => {
    logger.warn(`rebuild schedules saved before inputs named their workflow type could not be updated: ${reason(err).split('\n')[0]}`);
  });
  // API mode reaches no node over SSH: no executors at all.
  const executors = config.proxmoxApi
    ? {}
    : createExecutors(config, {
        spawner: opts.spawner ?? new Spawner(),
        ...(opts.mainNodeOverSsh ? { mainNodeLocal: false } : { mainNodeEnv: opts.mainNodeEnv }),
      });
  const proxmox = connectCluster(config, executors, (message) => logger.warn(message));
  let worker: RunningWorker | undefined;
  const closeAll = async () => {
    await worker?.stop();
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await proxmox.close();
    await temporal.close();
  };

  try {
    const knownNodes = await clusterNodes(proxmox, config, executors);
    const nodes = knownNodes.map((name) => proxmox.node(name)).filter((n) => n !== undefined);
    const { versions: nodeVersions, unreachable } = await checkNodeVersions(nodes);
    logger.info({ nodeVersions: Object.fromEntries(Object.entries(nodeVersions).map(([n, v]) => [n, v.version])) }, describeNodeVersions(nodeVersions));
    for (const [node, why] of Object.entries(unreachable)) {
      logger.warn({ node }, `node ${node}: could not read its Proxmox VE version (${why}); it is checked again at the next start`);
    }
    // API and worker in one process: the worker hands progress straight to the streams.
    const pushes = opts.worker !== false && opts.api !== false ? new ProgressPushes() : undefined;
    if (opts.worker !== false) {
      worker = await startWorker({ config, temporal, executors, proxmox, workflowBundlePath: opts.workflowBundlePath, metrics, pushes });
      // Once per DATA_DIR: markers of the form without the VM instance sealed for it. Not fatal:
      // until a pass reaches every VM, that form stays valid and the next start tries again.
      await resealLegacyMarkers(config, proxmox, (message) => logger.warn(message)).catch((err: unknown) => {
        logger.warn(`markers sealed without their VM instance could not be resealed, the next start tries again: ${reason(err).split('\n')[0]}`);
      });
    }
    // Replicas of the API share one cluster: a node that is down is no reason to take one
    // replica out of a load balancer, so the API alone checks only Temporal.
    const checks = [
      temporalCheck(temporal.client, opts.temporalAddress),
      ...(worker
        ? [
            workerCheck(worker.worker),
            ...Object.values(executors).map(nodeCheck),
            ...(config.proxmoxApi ? [apiCheck(proxmox.main())] : []),
          ]
        : []),
    ];
    const host = opts.host ?? config.apiHost;
    const listener =
      opts.api === false
        ? // Readiness details and metrics only: loopback unless WORKER_HEALTH_HOST opens it.
          await startWorkerHealth({ port: config.worker.healthPort, host: opts.host ?? config.worker.healthHost, checks, metrics })
        : await startApi({ config, temporal, proxmox, knownNodes, host, metrics, logger, checks, pushes, readerTiming: opts.readerTiming });
    return {
      url: listener.url,
      client: temporal.client,
      worker: worker?.worker,
      metrics,
      nodeVersions,
      async stop() {
        await listener.stop();
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
