import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import type { Config } from '../lib/config';
import type { Metrics } from '../lib/observability/metrics';
import { activityObservability, outputTails, resetRunsRefused } from './interceptors';
import { workerSinks } from './sinks';
import type { ProgressPushes } from '../lib/progressPushes';
import { workflowBundlerOptions } from './bundleOptions';
import type { Workflows } from '../contract';
import type * as registered from '../workflows';

/**
 * Compiles only while ../workflows exports exactly the workflow types of the contract,
 * each with the contract's input and result: the API starts them by name alone.
 */
type Exactly<T extends Workflows, Extra extends never> = [T, Extra];
export type RegisteredWorkflows = Exactly<typeof registered, Exclude<keyof typeof registered, keyof Workflows>>;

export interface WorkerDeps {
  config: Config;
  connection: NativeConnection;
  activities: object;
  /** A pre-built bundle (tests bundle once per run); otherwise the workflows are bundled now. */
  workflowBundlePath?: string;
  dataConverter?: WorkerOptions['dataConverter'];
  /** Where workflow facts (installs started, finished) and step durations are counted. */
  metrics?: Metrics;
  /** Where workflows' progress goes for the API's readers in this process, if any. */
  pushes?: ProgressPushes;
}

/** One worker runs every workflow and activity of the product on one task queue. */
export async function createWorker({ config, connection, activities, workflowBundlePath, dataConverter, metrics, pushes }: WorkerDeps): Promise<Worker> {
  return Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    activities,
    ...(workflowBundlePath
      ? { workflowBundle: { codePath: workflowBundlePath } }
      : { workflowsPath: require.resolve('../workflows'), bundlerOptions: { preloadModules: workflowBundlerOptions.preloadModules } }),
    dataConverter,
    interceptors: {
      activity: [activityObservability(metrics), resetRunsRefused(), outputTails()],
      // A prebuilt bundle has the workflow interceptors in it already (built with
      // workflowBundlerOptions); naming them again only makes the SDK warn at every start.
      ...(workflowBundlePath ? {} : { workflowModules: workflowBundlerOptions.workflowInterceptorModules }),
    },
    sinks: workerSinks({ metrics, pushes }),
    maxCachedWorkflows: config.worker.maxCachedWorkflows,
    // The SDK lowers this to the cache size itself, with a warning at every start.
    ...(config.worker.maxCachedWorkflows > 0 ? { maxConcurrentWorkflowTaskExecutions: Math.max(2, Math.min(40, config.worker.maxCachedWorkflows)) } : {}),
    // A handful of Proxmox nodes: more parallel qm calls than this only queue up on locks.
    maxConcurrentActivityTaskExecutions: 20,
    // On SIGTERM polling stops at once; running activities get this long to finish
    // before they are cancelled (and, heartbeating, hand over to another worker).
    shutdownGraceTime: config.worker.shutdownGraceSec * 1000,
    // Heartbeats after an attempt's first are held back up to this long. A heartbeat that
    // records a Proxmox task's UPID (activities/tasks.ts) must reach Temporal before a crash
    // can lose it, or the retry would start the task a second time.
    maxHeartbeatThrottleInterval: '2s',
  });
}
