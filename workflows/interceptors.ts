import {
  type ActivityInput,
  ApplicationFailure,
  type ContinueAsNewInput,
  defaultPayloadConverter,
  log,
  type Next,
  patched,
  type QueryInput,
  type SignalInput,
  type StartChildWorkflowExecutionInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
  workflowInfo,
} from '@temporalio/workflow';
import { RESET_RUN_HEADER, splitOutputTail, splitWorkflowType, withWorkflowType, type FailureType } from '../contract';
import { receiveOutputTail } from './progress';

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

function refused(message: string): ApplicationFailure {
  // The workflow fails before its first step: nothing reaches an activity, let alone a node.
  return ApplicationFailure.create({ type: 'InvalidRequestError' satisfies FailureType, message, nonRetryable: true });
}

/**
 * Histories recorded before inputs named their workflow type replay without it. Only a
 * replay of such a history can take that way: a run that meets this for the first time
 * (any new run, whoever started it) records the patch and must carry the type.
 */
const TYPE_BOUND_INPUTS = 'qemurun-input-names-workflow-type';

/**
 * The payload codec binds an input to its workflow id only; the input itself names the
 * workflow type it was written for (contract/workflows.ts, WORKFLOW_TYPE_FIELD). An input
 * recorded for one type and given to another under the same id (a `vmStop` of `vm-240`
 * started again as `vmDestroy`) fails here, before its first step.
 */
function typeChecked(args: unknown[]): unknown[] {
  const [first, ...rest] = args;
  const { input, workflowType } = splitWorkflowType(first);
  const { workflowType: running } = workflowInfo();
  if (workflowType === running) return [input, ...rest];
  if (workflowType === undefined && !patched(TYPE_BOUND_INPUTS)) return args;
  throw refused(
    workflowType === undefined
      ? `refusing an input that names no workflow type for workflow type ${running}: inputs are accepted only by the workflow type they were written for`
      : `refusing an input written for workflow type ${JSON.stringify(workflowType)} given to workflow type ${running}: inputs are accepted only by the workflow type they were written for`,
  );
}

class RefusedPayloads implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const why = refusal(input.args);
    if (why !== undefined) throw refused(why);
    return next({ ...input, args: typeChecked(input.args) });
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

/** Child workflows and continued runs carry their type in their input too (see typeChecked). */
class TypedStarts implements WorkflowOutboundCallsInterceptor {
  startChildWorkflowExecution(input: StartChildWorkflowExecutionInput, next: Next<WorkflowOutboundCallsInterceptor, 'startChildWorkflowExecution'>) {
    return next({ ...input, options: { ...input.options, args: withWorkflowType(input.workflowType, input.options.args ?? []) } });
  }

  continueAsNew(input: ContinueAsNewInput, next: Next<WorkflowOutboundCallsInterceptor, 'continueAsNew'>) {
    return next({ ...input, args: withWorkflowType(input.options.workflowType, input.args) });
  }
}

/**
 * An activity's last lines of output come with its result (contract OUTPUT_TAIL): they go
 * to the run's progress before the workflow code sees the result, as a signal's would have
 * come before it. No command is issued, so runs recorded with output signals replay alike.
 */
class OutputTails implements WorkflowOutboundCallsInterceptor {
  async scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    const { tail, result } = splitOutputTail(await next(input));
    if (tail) receiveOutputTail(tail);
    return result;
  }
}

export const interceptors = (): WorkflowInterceptors => ({ inbound: [new RefusedPayloads()], outbound: [new ResetRuns(), new TypedStarts(), new OutputTails()] });
