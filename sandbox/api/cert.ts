import fs from 'node:fs';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { generate } from 'selfsigned';

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

export async function ensureCertificate(apiDir: string, hostName: string): Promise<ApiCertificate> {
  const certFile = path.join(apiDir, 'pve-ssl.pem');
  const keyFile = path.join(apiDir, 'pve-ssl.key');
  if (!fs.existsSync(certFile) || !fs.existsSync(keyFile)) {
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
    fs.writeFileSync(keyFile, pems.private, { mode: 0o600 });
    fs.writeFileSync(certFile, pems.cert);
  }
  const certPem = fs.readFileSync(certFile, 'utf8');
  return { certPem, keyPem: fs.readFileSync(keyFile, 'utf8'), fingerprint: new X509Certificate(certPem).fingerprint256 };
}
