import type { InjectedSinks } from '@temporalio/worker';
import type { Metrics } from '../lib/observability/metrics';
import type { QemuRunSinks } from '../contract';

/**
 * The workflows' metrics sink, counting into the process's registry. Not called during
 * replay (the SDK's default), so only the first run of a workflow task counts. Registered
 * even without a registry (a worker that keeps no figures): a workflow calling a sink the
 * worker lacks is logged as an error on every call.
 */
export function metricsSinks(metrics?: Metrics): InjectedSinks<QemuRunSinks> {
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
  };
}
