import fs from 'node:fs';
import type { TLSConfig } from '@temporalio/client';

/**
 * mTLS between the service and a Temporal server it does not run itself. Without it,
 * anyone who reaches the server's port can read, terminate or start workflows; the payload
 * codec keeps them from reading secrets or starting QemuRun's work, but not from the rest.
 * The server checks the service's client certificate (issued by the deployment's own CA,
 * scripts/make-temporal-certs.sh), and the service checks the server's.
 */
export interface TemporalTlsFiles {
  /** Client certificate and key (PEM) the service presents. */
  cert?: string;
  key?: string;
  /** CA (PEM) that issued the server's certificate; unset: the system's CAs. */
  ca?: string;
  /** The name in the server's certificate, when the address does not carry it. */
  serverName?: string;
}

/** The SDK's `tls` option from the settings; undefined when none is set (plain gRPC). */
export function temporalTls(files: TemporalTlsFiles): TLSConfig | undefined {
  const { cert, key, ca, serverName } = files;
  if (!cert && !key && !ca && !serverName) return undefined;
  if (Boolean(cert) !== Boolean(key)) throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: set both or neither');
  const read = (file: string, setting: string) => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new Error(`${setting}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
    }
  };
  return {
    ...(cert && key ? { clientCertPair: { crt: read(cert, 'TEMPORAL_TLS_CERT'), key: read(key, 'TEMPORAL_TLS_KEY') } } : {}),
    ...(ca ? { serverRootCACertificate: read(ca, 'TEMPORAL_TLS_CA') } : {}),
    ...(serverName ? { serverNameOverride: serverName } : {}),
  };
}
