import { execa } from 'execa';
import { findTemporalCli, LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import type { Harness } from './harness';

/**
 * The real `temporal` CLI against the test's dev server: the way around the API that the
 * security tests take, as anyone who reaches the Temporal server could.
 */

export const temporalCli = findTemporalCli()?.path ?? LOCAL_CLI_PATH;

/** A start payload as the server holds it: base64 ciphertext (or JSON) and its metadata. */
export interface RecordedInput {
  data: string;
  metadata: Record<string, string>;
}

/** The start payload of the latest run of `workflowId`, with the type it was started as. */
export async function recordedInput(h: Harness, workflowId: string): Promise<RecordedInput & { type: string }> {
  const history = await h.service.client.workflowService.getWorkflowExecutionHistory({ namespace: h.config.temporal.namespace, execution: { workflowId } });
  const started = history.history!.events!.find((e) => e.workflowExecutionStartedEventAttributes)!.workflowExecutionStartedEventAttributes!;
  const payload = started.input!.payloads![0];
  return {
    type: started.workflowType?.name ?? '',
    data: Buffer.from(payload.data!).toString('base64'),
    metadata: Object.fromEntries(Object.entries(payload.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('utf8')])),
  };
}

/** `--input-meta` arguments for a recorded payload's metadata, less the keys in `without`. */
export function inputMetaArgs(input: RecordedInput, without: string[] = []): string[] {
  return Object.entries(input.metadata)
    .filter(([k]) => !without.includes(k))
    .flatMap(([k, v]) => ['--input-meta', `${k}=${v}`]);
}

/**
 * `temporal workflow execute` on the service's task queue. `input` is JSON text, or with
 * `--input-base64` among `extra` a recorded payload. The run timeout is long: a refused
 * input must end the run by itself, not by the timeout.
 */
export async function executeWithCli(h: Harness, type: string, input: string, workflowId: string, extra: string[] = []) {
  return execa(
    temporalCli,
    [
      'workflow', 'execute',
      '--address', process.env.TEST_TEMPORAL_ADDRESS!,
      '--namespace', h.config.temporal.namespace,
      '--type', type,
      '--task-queue', h.config.temporal.taskQueue,
      '--workflow-id', workflowId,
      '--input', input,
      ...extra,
      '--execution-timeout', '5m',
    ],
    { reject: false },
  );
}

/** A run's whole history as JSON text, to search for what it did or refused. */
export async function historyText(h: Harness, workflowId: string): Promise<string> {
  const history = await h.service.client.workflow.getHandle(workflowId).fetchHistory();
  return JSON.stringify(history.events ?? []);
}
