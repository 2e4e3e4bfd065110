import {
  type ActivityInput,
  ApplicationFailure,
  defaultPayloadConverter,
  log,
  type Next,
  type QueryInput,
  type SignalInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
  workflowInfo,
} from '@temporalio/workflow';
import { RESET_RUN_HEADER, type FailureType } from '../contract';

/**
 * What a payload the worker's codec refused decodes to (lib/temporal/codec.ts): input written
 * without the key (`temporal workflow start --input '{...}'`), or copied from another
 * workflow's history. Failing the workflow task instead would retry it forever, and a run
 * under `vm-<id>` would hold that VM busy until someone terminated it.
 */
const REFUSED = 'qemurunRefusedPayload';

function refusal(args: readonly unknown[]): string | undefined {
  for (const a of args) {
    const why = typeof a === 'object' && a !== null ? (a as Record<string, unknown>)[REFUSED] : undefined;
    if (typeof why === 'string') return why;
  }
  return undefined;
}

class RefusedPayloads implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const why = refusal(input.args);
    // The workflow fails before its first step: nothing reaches an activity, let alone a node.
    if (why !== undefined) throw ApplicationFailure.create({ type: 'InvalidRequestError' satisfies FailureType, message: why, nonRetryable: true });
    return next(input);
  }

  async handleSignal(input: SignalInput, next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>): Promise<void> {
    const why = refusal(input.args);
    // A stranger's signal must not fail the workflow it was sent to: it is dropped.
    if (why !== undefined) {
      log.warn('signal refused', { signal: input.signalName, reason: why });
      return;
    }
    return next(input);
  }

  handleQuery(input: QueryInput, next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>): Promise<unknown> {
    const why = refusal(input.args);
    if (why !== undefined) throw new Error(why);
    return next(input);
  }
}

/**
 * A reset (`temporal workflow reset`) replays a run's history into a new run and carries on
 * from the chosen point with the recorded input: a completed install or rebuild would run its
 * steps again against the VM that stands there now. Activities of such a run carry a header
 * that the worker's activity interceptor refuses (worker/interceptors.ts). The header, not a
 * failure here: the replayed part of the run must schedule what the original did, or the
 * replay would not match the history.
 */
class ResetRuns implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>) {
    const { runId, originalExecutionRunId } = workflowInfo();
    if (runId === originalExecutionRunId) return next(input);
    return next({ ...input, headers: { ...input.headers, [RESET_RUN_HEADER]: defaultPayloadConverter.toPayload(originalExecutionRunId) } });
  }
}

export const interceptors = (): WorkflowInterceptors => ({ inbound: [new RefusedPayloads()], outbound: [new ResetRuns()] });
