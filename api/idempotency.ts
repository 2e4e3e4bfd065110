import type { Client } from '@temporalio/client';
import { fromPayloadsAtIndex, type Payload, type WorkflowSerializationContext } from '@temporalio/common';
import { type InstallInput, renameLegacySpecFields } from '../contract';
import { EncryptionCodecError } from '../lib/temporal/codec';
import { HttpError } from './errors';

/**
 * `Idempotency-Key` on an install: a repeat of the same request attaches to the install the
 * first one started; the same key with another body is a client bug (it would silently get
 * the first install), answered `422` naming the key. The request the key was first used for
 * is read back from the workflow's own start event (decoded in process like any history),
 * so nothing about it, secrets included, has to be stored anywhere else.
 */

class IdempotencyKeyReused extends HttpError {
  override readonly name = 'IdempotencyKeyReused';
  constructor(
    readonly key: string,
    readonly workflowId: string,
  ) {
    super(422, `Idempotency-Key "${key.length > 100 ? `${key.slice(0, 100)}…` : key}" was already used for another install request (workflow ${workflowId}); use a new key for a different request`, { workflowId });
  }
}

/**
 * The key's workflow holds a request this deployment cannot decode: started under other
 * ENCRYPTION_KEYS (another deployment on the namespace derives the same workflow id from
 * the same key), or with a key since dropped. Whether it is the same request cannot be
 * told, and attaching to it would stream a workflow these workers cannot run: the key is
 * used up for this deployment, as for another request.
 */
class IdempotencyKeyUnreadable extends HttpError {
  override readonly name = 'IdempotencyKeyUnreadable';
  constructor(key: string, workflowId: string, reason: string) {
    super(422, `Idempotency-Key "${key.length > 100 ? `${key.slice(0, 100)}…` : key}" is held by workflow ${workflowId}, whose request cannot be decoded here (${reason}); use a new key`, {
      workflowId,
    });
  }
}

/**
 * What makes two install requests the same: the validated spec and the cloud-init password.
 * An install started before `cores` had its name recorded its spec with `cpu`.
 */
export function fingerprint(input: InstallInput): string {
  return canonical({ spec: renameLegacySpecFields(input.spec), passwd: input.secrets?.passwd });
}

/** JSON with sorted keys and without undefined members, so equal values compare equal. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Throws IdempotencyKeyReused when the install under `workflowId` was started with another request. */
export async function checkSameRequest(client: Client, key: string, workflowId: string, input: InstallInput): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const context: WorkflowSerializationContext = { type: 'workflow', namespace: client.options.namespace, workflowId };
  let payloads: Payload[];
  try {
    payloads = await decoded(client, (started?.input?.payloads ?? []) as Payload[], context);
  } catch (err) {
    if (err instanceof EncryptionCodecError) throw new IdempotencyKeyUnreadable(key, workflowId, err.message);
    throw err;
  }
  const first = fromPayloadsAtIndex<InstallInput>(client.options.loadedDataConverter.payloadConverter, 0, payloads, context);
  if (fingerprint(first) !== fingerprint(input)) throw new IdempotencyKeyReused(key, workflowId);
}

/** History payloads through the client's codecs, last one first, as the SDK decodes them (public API only). */
async function decoded(client: Client, payloads: Payload[], context: WorkflowSerializationContext): Promise<Payload[]> {
  const codecs = client.options.loadedDataConverter.payloadCodecs;
  for (let i = codecs.length - 1; i >= 0; i--) payloads = await codecs[i].decode(payloads, context);
  return payloads;
}
