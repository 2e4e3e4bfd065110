import crypto from 'node:crypto';
import type { DataConverter, Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/**
 * Encrypts every payload the SDK sends to Temporal (workflow and activity arguments and
 * results, signals, queries, memo), so the server's history holds ciphertext only.
 *
 * Wire format (the same as Temporal's samples-typescript `encryption` sample, so their
 * tooling can read it): metadata `encoding = binary/encrypted`, `encryption-key-id = <id>`,
 * data = IV (12 bytes) ‖ AES-256-GCM ciphertext ‖ tag (16 bytes), where the plaintext is the
 * whole serialized original Payload, metadata included (its `encoding` can say what the
 * data is, which is itself worth hiding).
 *
 * Each payload is bound to the workflow it belongs to (the SDK's serialization context: the
 * workflow, or the workflow that scheduled the activity): metadata `encryption-workflow-id`
 * names it and is the GCM associated data, so an input copied from one workflow's history
 * into the start of another is refused instead of run. A run a schedule starts has the
 * schedule's workflow id plus `-<time>`: it accepts payloads bound to that id. Payloads from
 * before binding (no such metadata) are read for display and replay only (`requireBinding`).
 * The context names no workflow *type*: the input itself carries it (WORKFLOW_TYPE_FIELD in
 * contract/workflows.ts), sealed here with the rest and checked by the workflow interceptor.
 *
 * Not covered: search attributes (the server must index them) and, with the SDK's default
 * failure converter, failure messages and stack traces. Never put secrets in those.
 */

export const ENCODING_ENCRYPTED = 'binary/encrypted';
export const METADATA_ENCODING_KEY = 'encoding';
const METADATA_KEY_ID_KEY = 'encryption-key-id';
export const METADATA_WORKFLOW_ID_KEY = 'encryption-workflow-id';
/** The field of the value a refused payload decodes to, for the workflow interceptor (workflows/interceptors.ts). */
const REFUSED_PAYLOAD_FIELD = 'qemurunRefusedPayload';

/** A schedule's runs are its action's workflow id and `-` and the scheduled time (RFC 3339). */
const SCHEDULED_SUFFIX = /^-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

function belongsTo(bound: string, workflowId: string): boolean {
  return workflowId === bound || (workflowId.startsWith(bound) && SCHEDULED_SUFFIX.test(workflowId.slice(bound.length)));
}

function associatedData(workflowId: string): Buffer {
  return Buffer.from(`qemurun/1 workflow-id=${workflowId}`);
}
const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A payload this codec cannot decrypt. The message names the key id, never key material. */
export class EncryptionCodecError extends Error {
  override name = 'EncryptionCodecError';
}

export interface EncryptionCodecKeys {
  /** Every key that may have encrypted stored history, by id. */
  keys: ReadonlyMap<string, Buffer>;
  /** The id of the key new payloads are encrypted with; older keys stay for decryption. */
  encryptWith: string;
  /**
   * The worker's way: a payload for a workflow must be bound to it (unbound ones come from
   * before binding, or from someone replaying them), and one the worker refuses decodes,
   * for a workflow, to `{ qemurunRefusedPayload: <why> }`, so the workflow fails at once
   * instead of failing its task forever (and holding `vm-<id>`).
   */
  worker?: boolean;
}

function text(bytes: Uint8Array | null | undefined): string | undefined {
  return bytes ? Buffer.from(bytes).toString('utf8') : undefined;
}

export class EncryptionCodec implements PayloadCodec {
  private readonly keys: ReadonlyMap<string, Buffer>;
  private readonly encryptWith: string;
  private readonly worker: boolean;

  constructor(opts: EncryptionCodecKeys) {
    for (const [id, key] of opts.keys) {
      if (key.length !== KEY_BYTES) throw new EncryptionCodecError(`encryption key "${id}" is ${key.length} bytes, AES-256 needs ${KEY_BYTES}`);
    }
    if (!opts.keys.has(opts.encryptWith)) {
      throw new EncryptionCodecError(`encryption key "${opts.encryptWith}" (the one to encrypt with) is not among the keys`);
    }
    // A private copy: a caller mutating its map later must not change what we decrypt with.
    this.keys = new Map(opts.keys);
    this.encryptWith = opts.encryptWith;
    this.worker = opts.worker ?? false;
  }

  /** The id new payloads are encrypted with (for start-up logs). */
  get keyId(): string {
    return this.encryptWith;
  }

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    const key = this.keys.get(this.encryptWith)!;
    const workflowId = context?.workflowId;
    return payloads.map((payload) => {
      const plain = temporal.api.common.v1.Payload.encode(payload).finish();
      // A fresh random IV per payload: GCM's security collapses if an IV repeats under one key.
      const iv = crypto.randomBytes(IV_BYTES);
      const cipher = crypto.createCipheriv(ALGORITHM, key, iv);
      if (workflowId !== undefined) cipher.setAAD(associatedData(workflowId));
      const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return {
        metadata: {
          [METADATA_ENCODING_KEY]: Buffer.from(ENCODING_ENCRYPTED),
          [METADATA_KEY_ID_KEY]: Buffer.from(this.encryptWith),
          ...(workflowId !== undefined ? { [METADATA_WORKFLOW_ID_KEY]: Buffer.from(workflowId) } : {}),
        },
        data: sealed,
      };
    });
  }

  async decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return payloads.map((payload) => {
      try {
        return this.decodeOne(payload, context);
      } catch (err) {
        if (!(this.worker && context?.type === 'workflow' && err instanceof EncryptionCodecError)) throw err;
        return refusedPayload(err.message);
      }
    });
  }

  private decodeOne(payload: Payload, context: SerializationContext | undefined): Payload {
    // A payload this codec did not encrypt was written by someone without the key (e.g.
    // `temporal workflow start` straight at the server): no workflow or activity may run
    // on it, or the server would be a way around the API's guard and input checks.
    const encoding = text(payload.metadata?.[METADATA_ENCODING_KEY]);
    if (encoding !== ENCODING_ENCRYPTED) {
      throw new EncryptionCodecError(
        `refusing a payload that is not encrypted (encoding ${JSON.stringify(encoding ?? '')}): ` +
          'only holders of the encryption key may start or signal QemuRun workflows; use the API',
      );
    }

    const keyId = text(payload.metadata?.[METADATA_KEY_ID_KEY]);
    if (!keyId) throw new EncryptionCodecError(`encrypted payload has no "${METADATA_KEY_ID_KEY}" metadata`);
    const key = this.keys.get(keyId);
    if (!key) {
      throw new EncryptionCodecError(
        `payload was encrypted with unknown key id "${keyId}" (known: ${[...this.keys.keys()].join(', ')}); ` +
          'add that key to ENCRYPTION_KEYS / ENCRYPTION_KEY_FILE after the current one',
      );
    }
    const sealed = Buffer.from(payload.data ?? []);
    if (sealed.length < IV_BYTES + TAG_BYTES) {
      throw new EncryptionCodecError(`encrypted payload (key id "${keyId}") is ${sealed.length} bytes, too short to be valid`);
    }
    const bound = text(payload.metadata?.[METADATA_WORKFLOW_ID_KEY]);
    const target = context?.workflowId;
    if (target !== undefined && bound !== undefined && !belongsTo(bound, target)) {
      throw new EncryptionCodecError(`refusing a payload of workflow "${bound}" given to workflow "${target}": a payload is accepted only by the workflow it was written for`);
    }
    if (target !== undefined && bound === undefined && this.worker) {
      throw new EncryptionCodecError(`refusing a payload bound to no workflow for workflow "${target}": payloads from before binding are read for display only`);
    }
    const decipher = crypto.createDecipheriv(ALGORITHM, key, sealed.subarray(0, IV_BYTES));
    if (bound !== undefined) decipher.setAAD(associatedData(bound));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
    } catch {
      // GCM refuses rather than returning garbage: either the key under this id changed or the data was altered.
      throw new EncryptionCodecError(`encrypted payload failed authentication with key "${keyId}": wrong key for this id, or altered data`);
    }
    return temporal.api.common.v1.Payload.decode(plain);
  }
}

/** What a refused payload decodes to for a workflow: a value its interceptor fails it on. */
function refusedPayload(reason: string): Payload {
  return {
    metadata: { [METADATA_ENCODING_KEY]: Buffer.from('json/plain') },
    data: Buffer.from(JSON.stringify({ [REFUSED_PAYLOAD_FIELD]: reason })),
  };
}

/**
 * The `dataConverter` for Client, Worker and anything else that reads or writes payloads.
 * Every one of them must get the same codec, or they will see ciphertext.
 */
export function dataConverterFor(codec: PayloadCodec): DataConverter {
  return { payloadCodecs: [codec] };
}
