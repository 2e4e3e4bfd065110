import type { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { createExecutors } from '../lib/executor';
import { connectCluster } from '../lib/proxmox';
import { apiCheck, nodeCheck, temporalCheck, workerCheck } from '../lib/readiness';
import { clusterNodes } from './proxmox';
import { connectService } from './temporal';
import { startWorker, type RunningWorker } from './worker';
import { startApi } from './api';

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
}

export interface RunningService {
  url: string;
  client: Client;
  worker?: Worker;
  stop(): Promise<void>;
}

/**
 * The composition root: one Temporal connection and one way to the cluster (an executor
 * per node, or the REST API), shared by the worker (startWorker in ./worker) and the HTTP
 * API (startApi in ./api).
 */
export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { config } = opts;
  const temporal = await connectService(config, opts.temporalAddress);
  // API mode reaches no node over SSH: no executors at all.
  const executors = config.proxmoxApi
    ? {}
    : createExecutors(config, opts.mainNodeOverSsh ? { mainNodeLocal: false } : { mainNodeEnv: opts.mainNodeEnv });
  const proxmox = connectCluster(config.proxmoxApi, executors);
  let worker: RunningWorker | undefined;
  const closeAll = async () => {
    await worker?.stop();
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await proxmox.close();
    await temporal.close();
  };

  try {
    const knownNodes = await clusterNodes(proxmox, config, executors);
    if (opts.worker !== false) worker = await startWorker({ config, temporal, executors, proxmox, workflowBundlePath: opts.workflowBundlePath });
    const api = await startApi({
      config,
      temporal,
      proxmox,
      knownNodes,
      host: opts.host ?? '0.0.0.0',
      checks: [
        temporalCheck(temporal.client, opts.temporalAddress),
        ...(worker ? [workerCheck(worker.worker)] : []),
        ...Object.values(executors).map(nodeCheck),
        ...(config.proxmoxApi ? [apiCheck(proxmox.node(config.mainNode)!)] : []),
      ],
    });
    return {
      url: api.url,
      client: temporal.client,
      worker: worker?.worker,
      async stop() {
        await api.stop();
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
