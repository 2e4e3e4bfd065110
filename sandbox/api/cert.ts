import fs from 'node:fs';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';

/**
 * The API server's TLS certificate, like a node's self-signed pve-ssl.pem: made on the
 * cluster's first start and kept in its state directory, so a client that pinned its
 * fingerprint keeps trusting it across restarts.
 */
export interface ApiCertificate {
  certPem: string;
  keyPem: string;
  /** SHA-256 of the DER certificate, `AB:CD:...` as `pvenode cert info` prints it. */
  fingerprint: string;
}

const certFile = (apiDir: string) => path.join(apiDir, 'pve-ssl.pem');
const keyFile = (apiDir: string) => path.join(apiDir, 'pve-ssl.key');

/**
 * Made by the API server process itself (./server.ts): the X.509 library it takes is a
 * few MB of memory that a process which only reads the certificate need not hold.
 */
export async function ensureCertificate(apiDir: string, hostName: string): Promise<ApiCertificate> {
  if (!fs.existsSync(certFile(apiDir)) || !fs.existsSync(keyFile(apiDir))) {
    const { generate } = await import('selfsigned');
    const now = new Date();
    const pems = await generate([{ name: 'commonName', value: hostName }, { name: 'organizationName', value: 'PVE Cluster Node' }, { shortName: 'OU', value: 'PVE Cluster Node' }], {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notBeforeDate: new Date(now.getTime() - 86_400_000),
      notAfterDate: new Date(now.getTime() + 2 * 365 * 86_400_000),
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }, { type: 2, value: 'localhost' }, { type: 2, value: hostName }] },
      ],
    });
    fs.mkdirSync(apiDir, { recursive: true });
    fs.writeFileSync(keyFile(apiDir), pems.private, { mode: 0o600 });
    fs.writeFileSync(certFile(apiDir), pems.cert);
  }
  return readCertificate(apiDir);
}

export function readCertificate(apiDir: string): ApiCertificate {
  const certPem = fs.readFileSync(certFile(apiDir), 'utf8');
  return { certPem, keyPem: fs.readFileSync(keyFile(apiDir), 'utf8'), fingerprint: new X509Certificate(certPem).fingerprint256 };
}
