import type { Config } from '../lib/config';
import { connectTemporal, ensureSearchAttributes, type TemporalConnections } from '../lib/temporal/connect';
import { temporalTls } from '../lib/temporal/tls';
import { EncryptionCodec, dataConverterFor } from '../lib/temporal/codec';
import { resolveEncryptionKeys } from '../lib/temporal/encryptionKeys';
import { StartupError, reason } from '../lib/startupError';
import type { Logger } from '../lib/observability/log';

export type TemporalConnection = TemporalConnections & {
  codec: EncryptionCodec;
  dataConverter: ReturnType<typeof dataConverterFor>;
  /** The worker's: strict about bindings, and a refused payload fails its workflow (codec.ts). */
  workerDataConverter: ReturnType<typeof dataConverterFor>;
};

/**
 * The payload codec (from the encryption keys) and one connection to the namespace, with
 * the product's search attributes registered. The API and the worker share both.
 */
export async function connectService(config: Config, temporalAddress: string, logger: Logger): Promise<TemporalConnection> {
  let keys: ReturnType<typeof resolveEncryptionKeys>;
  try {
    keys = resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
  } catch (err) {
    // Its messages name the setting and the entry (never key material).
    throw new StartupError(`payload encryption keys: ${reason(err)}`, undefined, { cause: err });
  }
  if (keys.created) {
    logger.warn(`created the payload encryption key file ${keys.created}: back it up, history cannot be read without it`);
  }
  const codec = new EncryptionCodec(keys);
  const dataConverter = dataConverterFor(codec);
  try {
    const temporal = await connectTemporal({
      address: temporalAddress,
      namespace: config.temporal.namespace,
      dataConverter,
      tls: temporalTls(config.temporal.tls),
    });
    await ensureSearchAttributes(temporal.connection, config.temporal.namespace);
    return { ...temporal, codec, dataConverter, workerDataConverter: dataConverterFor(new EncryptionCodec({ ...keys, worker: true })) };
  } catch (err) {
    throw new StartupError(
      `cannot reach Temporal at ${temporalAddress} (namespace ${config.temporal.namespace}): ${reason(err).split('\n')[0]}\n` +
        'start that server, fix TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (and TEMPORAL_TLS_*), or unset TEMPORAL_ADDRESS to run the embedded dev server',
      undefined,
      { cause: err },
    );
  }
}
