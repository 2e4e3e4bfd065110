import { CancelledFailure, type Context } from '@temporalio/activity';
import type { ActivityInterceptors } from '@temporalio/worker';
import type { Metrics } from '../lib/observability/metrics';
import { failure, RESET_RUN_HEADER } from '../contract';
import { carryingOutputTail } from '../activities/output';

/**
 * Refuses every activity of a run made by `temporal workflow reset` (the workflow marks them,
 * workflows/interceptors.ts): the run would repeat a finished operation with its recorded
 * input against what the cluster holds now. Non-retryable; the run fails before any command.
 */
export function resetRunsRefused() {
  return (ctx: Context): ActivityInterceptors => ({
    inbound: {
      async execute(input, next) {
        if (input.headers[RESET_RUN_HEADER] !== undefined) {
          throw failure(
            'ResetRunError',
            `refusing ${ctx.info.activityType}: workflow ${ctx.info.workflowExecution?.workflowId ?? ''} was reset (temporal workflow reset), ` +
              'and a reset would repeat a finished operation against the VM as it is now; start a new operation through the API',
          );
        }
        return next(input);
      },
    },
  });
}

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

/** The last of an activity's command output rides with its result (activities/output.ts). */
export function outputTails() {
  return (): ActivityInterceptors => ({
    inbound: {
      execute: (input, next) => carryingOutputTail(() => next(input)),
    },
  });
}
