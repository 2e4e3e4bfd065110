import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { execa } from 'execa';
import { connectTemporal } from '../../lib/temporal/connect';
import { temporalTls } from '../../lib/temporal/tls';
import { loadConfig } from '../../lib/config';

/**
 * mTLS between the service and Temporal, with certificates from
 * scripts/make-temporal-certs.sh. The dev server speaks plain gRPC, so a TLS front that
 * demands a client certificate from the deployment's CA (what a production frontend with
 * requireClientAuth does) stands before it: the service's connection, built from the
 * TEMPORAL_TLS_* settings, gets through; one without the client certificate does not.
 */

let dir: string;
let front: tls.Server;
let address: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-tls-'));
  await execa('bash', [path.join(__dirname, '..', '..', 'scripts', 'make-temporal-certs.sh'), path.join(dir, 'certs'), 'temporal', 'localhost']);
  const certs = path.join(dir, 'certs');
  const [host, port] = process.env.TEST_TEMPORAL_ADDRESS!.split(':');
  front = tls.createServer(
    {
      cert: fs.readFileSync(path.join(certs, 'server.pem')),
      key: fs.readFileSync(path.join(certs, 'server.key')),
      ca: fs.readFileSync(path.join(certs, 'ca.pem')),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    },
    (socket) => {
      const upstream = net.connect(Number(port), host);
      socket.pipe(upstream).pipe(socket);
      const end = () => {
        socket.destroy();
        upstream.destroy();
      };
      socket.on('error', end);
      upstream.on('error', end);
    },
  );
  front.on('tlsClientError', () => undefined);
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  address = `127.0.0.1:${(front.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((r) => front?.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

const certFile = (name: string) => path.join(dir, 'certs', name);

test('the script makes a CA, a server certificate for the given names and client certificates; keys are 0600', async () => {
  for (const leaf of ['server', 'qemurun', 'temporal-ui', 'admin-tools']) {
    await execa('openssl', ['verify', '-CAfile', certFile('ca.pem'), certFile(`${leaf}.pem`)]);
    expect(fs.statSync(certFile(`${leaf}.key`)).mode & 0o077).toBe(0);
  }
  const { stdout } = await execa('openssl', ['x509', '-in', certFile('server.pem'), '-noout', '-ext', 'subjectAltName']);
  expect(stdout).toMatch(/DNS:temporal, DNS:localhost/);
});

test('with TEMPORAL_TLS_* the service connects through a front that requires its client certificate', async () => {
  const config = loadConfig({
    TEMPORAL_TLS_CERT: certFile('qemurun.pem'),
    TEMPORAL_TLS_KEY: certFile('qemurun.key'),
    TEMPORAL_TLS_CA: certFile('ca.pem'),
    TEMPORAL_TLS_SERVER_NAME: 'temporal',
  });
  const conn = await connectTemporal({ address, namespace: 'default', tls: temporalTls(config.temporal.tls) });
  try {
    const { count } = await conn.client.workflow.count();
    expect(count).toBeGreaterThanOrEqual(0);
  } finally {
    await conn.close();
  }
});

test('without the client certificate the front refuses the connection', async () => {
  const tlsNoCert = temporalTls({ ca: certFile('ca.pem'), serverName: 'temporal' });
  await expect(connectTemporal({ address, namespace: 'default', tls: tlsNoCert })).rejects.toThrow();
});

test('a certificate without its key is a configuration error naming both settings', () => {
  expect(() => temporalTls({ cert: certFile('qemurun.pem') })).toThrow(/TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY/);
  expect(temporalTls({})).toBeUndefined();
});
