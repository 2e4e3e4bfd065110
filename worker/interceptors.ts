import { CancelledFailure, type Context } from '@temporalio/activity';
import type { ActivityInterceptors } from '@temporalio/worker';
import type { Metrics } from '../lib/observability/metrics';

/**
 * Around every activity: its log lines carry the activity, its attempt, the workflow and
 * (when the input names one) the VMID; each attempt's duration goes to the step histogram
 * and one line says how it ended. Never logs the input: it may carry a password.
 */
export function activityObservability(metrics?: Metrics) {
  return (ctx: Context): ActivityInterceptors => {
    let vmid: number | undefined;
    return {
      inbound: {
        async execute(input, next) {
          const first = input.args[0] as { vmid?: unknown } | undefined;
          if (typeof first?.vmid === 'number') vmid = first.vmid;
          const started = process.hrtime.bigint();
          let outcome = 'failed';
          try {
            const result = await next(input);
            outcome = 'completed';
            return result;
          } catch (err) {
            outcome = err instanceof CancelledFailure ? 'cancelled' : 'failed';
            ctx.log.warn(`activity ${outcome}`, { error: err instanceof Error ? err.message : String(err) });
            throw err;
          } finally {
            const seconds = Number(process.hrtime.bigint() - started) / 1e9;
            metrics?.stepDuration.observe({ activity: ctx.info.activityType, outcome }, seconds);
            if (outcome === 'completed') ctx.log.info('activity completed', { durationMs: Math.round(seconds * 1000) });
          }
        },
      },
      outbound: {
        getLogAttributes(attributes, next) {
          // The task token completes the activity from anywhere: it stays out of logs.
          const { taskToken: _taskToken, ...rest } = attributes;
          return next({ ...rest, activity: ctx.info.activityType, ...(vmid !== undefined ? { vmid } : {}) });
        },
      },
    };
  };
}
