import type { Worker } from '@temporalio/worker';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import type { ProxmoxCluster } from '../lib/proxmox';
import { createActivities } from '../activities';
import { createWorker } from '../worker/worker';
import type { TemporalConnection } from './temporal';
import type { Metrics } from '../lib/observability/metrics';
import type { ProgressPushes } from '../lib/progressPushes';

export interface RunningWorker {
  worker: Worker;
  /** Stops polling, lets running activities finish (up to the grace time) and waits. */
  stop(): Promise<void>;
}

/**
 * The worker role: every activity (closed over the cluster's nodes) and every workflow
 * of the product, polling the configured task queue until stopped.
 */
export async function startWorker(opts: {
  config: Config;
  temporal: TemporalConnection;
  executors: Record<string, NodeExecutor>;
  proxmox: ProxmoxCluster;
  workflowBundlePath?: string;
  /** Image figures, step durations and the workflows' install counts go here. */
  metrics?: Metrics;
  /** The API's progress readers in this process, if it has an API. */
  pushes?: ProgressPushes;
}): Promise<RunningWorker> {
  const { config, temporal, executors, proxmox, metrics } = opts;
  const activities = createActivities({ config, executors, proxmox, client: temporal.client, metrics });
  const worker = await createWorker({
    config,
    connection: temporal.nativeConnection,
    activities,
    workflowBundlePath: opts.workflowBundlePath,
    dataConverter: temporal.workerDataConverter,
    metrics,
    pushes: opts.pushes,
  });
  const done = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done.catch(() => undefined);
    },
  };
}
