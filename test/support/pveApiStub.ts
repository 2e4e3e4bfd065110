import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for a Proxmox VE node's API on loopback, with its own self-signed
 * certificate, for the client's unit tests: each route answers what the real API answers
 * (status line carrying the message, `{"data": ...}` bodies), and every request is kept
 * for assertions.
 */

export interface StubRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  form: URLSearchParams;
  authorization?: string;
}

export interface StubAnswer {
  status?: number;
  /** The reason phrase: where Proxmox puts its error message. */
  message?: string;
  data?: unknown;
  errors?: Record<string, string>;
}

export type StubRoute = (req: StubRequest) => StubAnswer | Promise<StubAnswer>;

export interface PveApiStub {
  url: string;
  port: number;
  /** PEM of the self-signed certificate (its own CA). */
  certPem: string;
  /** `AA:BB:...`, as `pvenode cert info` prints it. */
  fingerprint: string;
  requests: StubRequest[];
  routes: Map<string, StubRoute>;
  /** `route('POST /nodes/pve1/qemu', ...)`; a path may end in `*`. */
  route(key: string, handler: StubRoute): void;
  close(): Promise<void>;
}

// eslint-disable-next-line no-restricted-syntax -- a memo: the same throwaway certificate serves every stub of the process
let cached: { key: string; cert: string } | undefined;

/** One key pair per test process: openssl is run once. */
function selfSigned(): { key: string; cert: string } {
  if (cached) return cached;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pve-stub-'));
  try {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')],
      { stdio: 'ignore' },
    );
    cached = { key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
    return cached;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function startPveApiStub(): Promise<PveApiStub> {
  const { key, cert } = selfSigned();
  const requests: StubRequest[] = [];
  const routes = new Map<string, StubRoute>();
  const server = https.createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'https://stub');
        const apiPath = url.pathname.replace(/^\/api2\/json/, '');
        const request: StubRequest = {
          method: req.method ?? 'GET',
          path: decodeURIComponent(apiPath),
          query: url.searchParams,
          form: new URLSearchParams(Buffer.concat(chunks).toString('utf8')),
          authorization: req.headers.authorization,
        };
        requests.push(request);
        const handler =
          routes.get(`${request.method} ${request.path}`) ??
          [...routes.entries()].find(([k]) => k.endsWith('*') && `${request.method} ${request.path}`.startsWith(k.slice(0, -1)))?.[1];
        const answer: StubAnswer = handler ? await handler(request) : { status: 501, message: `Method '${request.method} ${apiPath}' not implemented` };
        const status = answer.status ?? 200;
        const body = JSON.stringify({ data: answer.data ?? null, ...(answer.errors ? { errors: answer.errors } : {}) });
        res.writeHead(status, answer.message ?? (status === 200 ? 'OK' : 'error'), { 'Content-Type': 'application/json;charset=UTF-8' });
        res.end(body);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const fingerprint = new crypto.X509Certificate(cert).fingerprint256;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    certPem: cert,
    fingerprint,
    requests,
    routes,
    route: (k, h) => routes.set(k, h),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A UPID as pve-manager makes them. */
export function fakeUpid(node: string, type: string, id: string): string {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(8, '0');
  return `UPID:${node}:${hex(process.pid)}:${hex(Math.floor(Math.random() * 1e8))}:${hex(Math.floor(Date.now() / 1000))}:${type}:${id}:qemurun@pve!test:`;
}

/**
 * A task on the stub: status `running` for `runningPolls` status reads, then stopped with
 * `exitstatus`; its log lines appear one per poll.
 */
export function stubTask(stub: PveApiStub, upid: string, lines: string[], exitstatus = 'OK', runningPolls = 2): { statusReads: () => number } {
  const node = upid.split(':')[1];
  let reads = 0;
  const base = `/nodes/${node}/tasks/${upid}`;
  stub.route(`GET ${base}/status`, () => {
    reads++;
    return { data: reads > runningPolls ? { status: 'stopped', exitstatus, upid } : { status: 'running', upid } };
  });
  stub.route(`GET ${base}/log`, (req) => {
    const start = Number(req.query.get('start') ?? 0);
    const visible = reads > runningPolls ? [...lines, exitstatus === 'OK' ? 'TASK OK' : `TASK ERROR: ${exitstatus}`] : lines.slice(0, reads);
    return { data: visible.slice(start).map((t, i) => ({ n: start + i + 1, t })) };
  });
  return { statusReads: () => reads };
}
