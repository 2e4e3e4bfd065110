import type { Payload, PayloadCodec } from '@temporalio/common';
import { ENCODING_ENCRYPTED, METADATA_ENCODING_KEY } from './codec';

/**
 * What the codec endpoint hands people (the Temporal UI, `temporal --codec-endpoint`):
 * history decrypted for reading, with every secret replaced by "<redacted>", so any
 * operator can read history without being handed VM passwords. Workers and the API
 * decode in full, in process, with the EncryptionCodec itself; nothing here encodes.
 *
 * Secrets are found by field name, wherever they sit in a payload: an install's
 * `secrets`, the cloud-init `passwd` (request, rebuild and schedule inputs, activity
 * inputs), the root password, a kept password hash, and cloud-init user-data (`userData`
 * in configureVm's input: it may hold secrets of its own).
 */

const REDACTED = '<redacted>';

/** Field names whose values are secrets, in every workflow, activity and schedule payload. */
const SECRET_FIELDS: ReadonlySet<string> = new Set(['secrets', 'passwd', 'passwdHash', 'rootPassword', 'password', 'cipassword', 'userData']);

/** A copy of `value` with every secret field's value replaced. */
function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, SECRET_FIELDS.has(k) && v !== undefined && v !== null ? REDACTED : redactSecrets(v)]),
  );
}

const text = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);

function redactPayload(payload: Payload): Payload {
  if (text(payload.metadata?.[METADATA_ENCODING_KEY]) !== 'json/plain') return payload;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload.data ?? []).toString('utf8'));
  } catch {
    return payload;
  }
  return { ...payload, data: Buffer.from(JSON.stringify(redactSecrets(value))) };
}

class DisplayOnlyError extends Error {
  override name = 'DisplayOnlyError';
}

/**
 * Decodes for display: encrypted payloads through `codec`, others (written by someone
 * without the key, which no worker accepts) shown as they are; both redacted.
 */
export function displayCodec(codec: PayloadCodec): PayloadCodec {
  return {
    async decode(payloads: Payload[]): Promise<Payload[]> {
      return Promise.all(
        payloads.map(async (p) => {
          const encrypted = text(p.metadata?.[METADATA_ENCODING_KEY]) === ENCODING_ENCRYPTED;
          const [plain] = encrypted ? await codec.decode([p]) : [p];
          return redactPayload(plain);
        }),
      );
    },
    async encode(): Promise<Payload[]> {
      // Encrypting for a caller would hand out a way to start or signal workflows
      // without the API's checks: only the service itself encodes.
      throw new DisplayOnlyError('the codec endpoint only decodes, for display; start or change work through the API');
    },
  };
}
