import type { Client } from '@temporalio/client';
import type { SerializationContext } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';

/** One workflow execution as visibility lists it: nothing decoded. */
export type ListedWorkflow = temporal.api.workflow.v1.IWorkflowExecutionInfo;

/**
 * The workflows of the client's namespace that match a visibility query, page by page,
 * through the raw `ListWorkflowExecutions` call. The SDK's `client.workflow.list()` decodes
 * each match's memo through the payload codec, and one memo it cannot decode (a workflow
 * started by another deployment on the namespace, or with a key since dropped) ends the
 * whole listing: anyone who may start a workflow in the namespace could break ours.
 */
export async function* listWorkflows(client: Client, query: string, pageSize?: number): AsyncGenerator<ListedWorkflow> {
  const namespace = client.options.namespace;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listWorkflowExecutions({ namespace, query, pageSize, nextPageToken });
    yield* page.executions ?? [];
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
}

/**
 * A listed workflow's memo, decoded through the client's codec and converter as the SDK
 * decodes it (in the workflow's serialization context): the fields, or the error that
 * stopped it (an EncryptionCodecError names the key id this deployment lacks).
 */
export async function decodeListedMemo(client: Client, wf: ListedWorkflow): Promise<{ memo?: Record<string, unknown> } | { error: Error }> {
  const fields = wf.memo?.fields;
  if (!fields || Object.keys(fields).length === 0) return {};
  const { payloadCodecs, payloadConverter } = client.options.loadedDataConverter;
  const context: SerializationContext = { type: 'workflow', namespace: client.options.namespace, workflowId: wf.execution?.workflowId ?? '' };
  try {
    const memo: Record<string, unknown> = {};
    for (const [name, payload] of Object.entries(fields)) {
      // Codecs decode in the reverse of the order they encode in.
      let payloads = [payload];
      for (const codec of [...payloadCodecs].reverse()) payloads = await codec.decode(payloads, context);
      memo[name] = payloadConverter.fromPayload(payloads[0], context);
    }
    return { memo };
  } catch (err) {
    return { error: err instanceof Error ? err : new Error(String(err)) };
  }
}
