import { isGrpcServiceError, type Client, type WorkflowExecutionStatusName } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** What the server says of one workflow run, with nothing decoded: no memo, no payload. */
export interface UndecodedDescription {
  workflowId: string;
  runId: string;
  type: string;
  taskQueue: string;
  /** As the SDK's `describe()` names it ('RUNNING', 'CANCELLED', ...). */
  status: WorkflowExecutionStatusName;
  startTime?: Date;
  closeTime?: Date;
}

const S = temporal.api.enums.v1.WorkflowExecutionStatus;
const STATUS_NAMES: ReadonlyMap<number, WorkflowExecutionStatusName> = new Map([
  [S.WORKFLOW_EXECUTION_STATUS_RUNNING, 'RUNNING'],
  [S.WORKFLOW_EXECUTION_STATUS_COMPLETED, 'COMPLETED'],
  [S.WORKFLOW_EXECUTION_STATUS_FAILED, 'FAILED'],
  [S.WORKFLOW_EXECUTION_STATUS_CANCELED, 'CANCELLED'],
  [S.WORKFLOW_EXECUTION_STATUS_TERMINATED, 'TERMINATED'],
  [S.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, 'CONTINUED_AS_NEW'],
  [S.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, 'TIMED_OUT'],
  [S.WORKFLOW_EXECUTION_STATUS_PAUSED, 'PAUSED'],
  [S.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, 'UNSPECIFIED'],
]);

/** The SDK's name of a raw status number. */
export function statusName(status: number | null | undefined): WorkflowExecutionStatusName {
  return STATUS_NAMES.get(status ?? S.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED) ?? 'UNKNOWN';
}

/** gRPC's NOT_FOUND: the namespace knows no such workflow (or run). */
const GRPC_NOT_FOUND = 5;

/** A protobuf timestamp of the server's as a Date. */
export function toDate(ts: temporal.api.workflow.v1.IWorkflowExecutionInfo['startTime']): Date | undefined {
  if (!ts) return undefined;
  return new Date(Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1_000_000));
}

/**
 * A workflow run's status, type and times through the raw `DescribeWorkflowExecution`, or
 * undefined when the namespace does not know it. The SDK's `handle.describe()` decodes the
 * memo through the payload codec and throws when it cannot: a workflow sealed with a key
 * this deployment lacks (another deployment on the namespace, a key dropped too early, a
 * start by hand) would fail whatever only wanted to know whether it runs. Without `runId`,
 * the latest run of the id.
 */
export async function describeUndecoded(client: Client, workflowId: string, runId?: string): Promise<UndecodedDescription | undefined> {
  let response: temporal.api.workflowservice.v1.IDescribeWorkflowExecutionResponse;
  try {
    response = await client.workflowService.describeWorkflowExecution({ namespace: client.options.namespace, execution: { workflowId, runId } });
  } catch (err) {
    if (isGrpcServiceError(err) && err.code === GRPC_NOT_FOUND) return undefined;
    throw err;
  }
  const info = response.workflowExecutionInfo ?? {};
  const startTime = toDate(info.startTime);
  const closeTime = toDate(info.closeTime);
  return {
    workflowId: info.execution?.workflowId ?? workflowId,
    runId: info.execution?.runId ?? runId ?? '',
    type: info.type?.name ?? '',
    taskQueue: info.taskQueue ?? '',
    status: statusName(info.status),
    ...(startTime ? { startTime } : {}),
    ...(closeTime ? { closeTime } : {}),
  };
}
