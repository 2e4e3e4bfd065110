import type { Worker } from '@temporalio/worker';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import { createActivities } from '../activities';
import { createWorker } from '../worker/worker';
import type { TemporalConnection } from './temporal';

export interface RunningWorker {
  worker: Worker;
  /** Stops polling, lets running activities finish (up to the grace time) and waits. */
  stop(): Promise<void>;
}

/**
 * The worker role: every activity (closed over the node executors) and every workflow
 * of the product, polling the configured task queue until stopped.
 */
export async function startWorker(opts: {
  config: Config;
  temporal: TemporalConnection;
  executors: Record<string, NodeExecutor>;
  workflowBundlePath?: string;
}): Promise<RunningWorker> {
  const { config, temporal, executors } = opts;
  const activities = createActivities({ config, executors, client: temporal.client });
  const worker = await createWorker({
    config,
    connection: temporal.nativeConnection,
    activities,
    workflowBundlePath: opts.workflowBundlePath,
    dataConverter: temporal.dataConverter,
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
