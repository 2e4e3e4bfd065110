import type { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { createExecutors } from '../lib/executor';
import { nodeCheck, temporalCheck, workerCheck } from '../lib/readiness';
import { connectService } from './temporal';
import { startWorker, type RunningWorker } from './worker';
import { startApi } from './api';
import { startWorkerHealth } from './workerHealth';

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

/**
 * The composition root: one Temporal connection and one executor per node, shared by the
 * worker (startWorker in ./worker) and the HTTP API (startApi in ./api). A process of one
 * role runs one of them: the API alone, or the worker with its health port (./workerHealth).
 */
export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { config } = opts;
  const temporal = await connectService(config, opts.temporalAddress);
  const executors = createExecutors(
    config,
    opts.mainNodeOverSsh ? { mainNodeLocal: false } : { mainNodeEnv: opts.mainNodeEnv },
  );
  let worker: RunningWorker | undefined;
  const closeAll = async () => {
    await worker?.stop();
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await temporal.close();
  };

  try {
    if (opts.worker !== false) worker = await startWorker({ config, temporal, executors, workflowBundlePath: opts.workflowBundlePath });
    // Replicas of the API share one cluster: a node that is down is no reason to take one
    // replica out of a load balancer, so the API alone checks only Temporal.
    const checks = [
      temporalCheck(temporal.client, opts.temporalAddress),
      ...(worker ? [workerCheck(worker.worker), ...Object.values(executors).map(nodeCheck)] : []),
    ];
    const listener =
      opts.api === false
        ? await startWorkerHealth({ port: config.worker.healthPort, host: opts.host ?? '0.0.0.0', checks })
        : await startApi({ config, temporal, executors, host: opts.host ?? '0.0.0.0', checks });
    return {
      url: listener.url,
      client: temporal.client,
      worker: worker?.worker,
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
