import type { InjectedSinks } from '@temporalio/worker';
import type { Metrics } from '../lib/observability/metrics';
import type { ProgressPushes } from '../lib/progressPushes';
import type { QemuRunSinks } from '../contract';

/**
 * The workflows' sinks: metrics counted into the process's registry, and progress handed
 * to the API's readers in the same process. Not called during replay (the SDK's default),
 * so only the first run of a workflow task counts or pushes. Registered even without a
 * registry or an API here (a worker that keeps no figures, role worker): a workflow
 * calling a sink the worker lacks is logged as an error on every call.
 */
export function workerSinks(opts: { metrics?: Metrics; pushes?: ProgressPushes } = {}): InjectedSinks<QemuRunSinks> {
  const { metrics, pushes } = opts;
  return {
    metrics: {
      installStarted: { fn: (_info, os) => metrics?.installsStarted.inc({ os }) },
      installFinished: {
        fn: (_info, os, outcome, seconds, failedStep) => {
          if (!metrics) return;
          if (outcome === 'completed') metrics.installsCompleted.inc({ os });
          else metrics.installsFailed.inc({ os, step: failedStep ?? '', reason: outcome });
          metrics.installDuration.observe({ os, outcome }, seconds);
        },
      },
      vmidTaken: { fn: () => metrics?.vmidRetries.inc() },
    },
    progress: {
      recorded: { fn: ({ workflowId, runId }, event) => pushes?.publish({ workflowId, runId, event }) },
      ended: { fn: ({ workflowId, runId }, state, lastSeq) => pushes?.publish({ workflowId, runId, ended: { state, lastSeq } }) },
    },
  };
}
