import http from 'node:http';
import { startHarness, Harness } from '../support/harness';
import { send, sendRaw } from '../support/securityHttp';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { findDuplicateKey, limitsFor, requestTimeout } from '../../api/limits';
import { createApp } from '../../api/app';
import { cliCluster } from '../../lib/proxmox';
import { readCalls, type CallRecord } from '../../sandbox/state/callLog';

/**
 * HTTP hardening (api/limits.ts): a deadline for every answer that is not an event
 * stream (REQUEST_TIMEOUT_MS), event streams capped per client (SSE_MAX_PER_CLIENT),
 * and JSON answers for requests Node's HTTP parser refuses.
 */

const TIMEOUT_MS = 1500;
const MAX_STREAMS = 3;
const MAX_TOTAL = 5;

let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    REQUEST_TIMEOUT_MS: String(TIMEOUT_MS),
    SSE_MAX_PER_CLIENT: String(MAX_STREAMS),
    SSE_MAX_TOTAL: String(MAX_TOTAL),
    // These tests fill the server with watchers; the reserve for installs has its own test.
    SSE_MAX_ANONYMOUS: String(MAX_TOTAL),
    // Guests take long to boot, so an install's stream stays open while the tests watch it.
    SANDBOX_BOOT_DELAY_MS: '45000',
  });
});

afterAll(async () => {
  await h?.stop();
});

interface OpenStream {
  status: number;
  contentType?: string;
  body: () => string;
  ended: () => boolean;
  /** The body's first match of `re`, once the stream has sent it. */
  match: (re: RegExp) => Promise<RegExpExecArray>;
  close: () => void;
}

/** Opens an event stream (GET, or POST with a JSON body) and keeps it open until `close()`. */
function openStream(path: string, body?: unknown, from?: string, base = h.service.url): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(`${base}${path}`, {
      method: payload ? 'POST' : 'GET',
      agent: false,
      // Another loopback address is another client.
      localAddress: from,
      headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {},
    });
    req.on('response', (res) => {
      let body = '';
      let ended = false;
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => (ended = true));
      res.on('close', () => (ended = true));
      const match = (re: RegExp) =>
        new Promise<RegExpExecArray>((found, missing) => {
          const look = () => {
            const m = re.exec(body);
            if (m) found(m);
            else if (ended) missing(new Error(`the stream ended without ${re}: ${body}`));
            else return false;
            res.off('data', look).off('close', look);
            return true;
          };
          if (!look()) res.on('data', look).on('close', look);
        });
      resolve({
        status: res.statusCode ?? 0,
        contentType: res.headers['content-type'],
        body: () => body,
        ended: () => ended,
        match,
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** A stream closed by the client frees its slot when the server sees the socket close: soon. */
async function openWhenFree(path: string, from?: string): Promise<OpenStream> {
  for (let i = 0; ; i++) {
    const s = await openStream(path, undefined, from);
    if ((s.status !== 429 && s.status !== 503) || i >= 30) return s;
    s.close();
    await sleep(100);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once the cluster has logged the slowed `pvesh get /cluster/resources` after call `since`. */
async function slowCallEnded(since: number): Promise<void> {
  const slowed = (c: CallRecord) => c.argv.join(' ').startsWith('pvesh get /cluster/resources') && c.durationMs >= TIMEOUT_MS;
  while (!readCalls(h.sandbox.dir).slice(since).some(slowed)) await sleep(100);
}

async function workflowCount(): Promise<number> {
  return (await h.service.client.workflow.count(`TaskQueue = '${h.config.temporal.taskQueue}'`)).count;
}

describe('request deadline (REQUEST_TIMEOUT_MS)', () => {
  test('a body that stalls gets 408 JSON at the deadline, and the connection is closed', async () => {
    const t0 = Date.now();
    const a = await sendRaw(
      h.service.url,
      'POST /api/vm/install HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"os":"debian",',
      10_000,
    );
    const elapsed = Date.now() - t0;
    // The 408 is the deadline firing (sendRaw alone would give up at 10 s with nothing);
    // that it is not early is a lower bound the server's timer guarantees, however loaded.
    expect(a.status).toBe(408);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/timed out/) });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
    expect(await workflowCount()).toBe(0);
  });

  test('headers that stall get 408 JSON (headersTimeout)', async () => {
    // Node's own headersTimeout is a minute: a 408 before sendRaw gives up (10 s) is ours.
    const a = await sendRaw(h.service.url, 'GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ', 10_000);
    expect(a.status).toBe(408);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/timed out/) });
  });

  test('an answer that takes too long gets 503 JSON at the deadline', async () => {
    // /vm/list reads the cluster with pvesh; make the cluster slow.
    const calls = readCalls(h.sandbox.dir).length;
    await h.sandbox.injectFault({ command: 'pvesh get /cluster/resources', latencyMs: TIMEOUT_MS + 2000, times: 1 });
    const a = await send(h.service.url, { path: '/api/vm/list' });
    // A 503 and not the list: the answer came at the deadline, before the cluster's.
    expect(a.status).toBe(503);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/timed out/) });
    // The slow handler finishing late must not break anything: once the cluster has
    // answered it (a call is logged when it ends), the route and the server still answer.
    await slowCallEnded(calls);
    expect((await send(h.service.url, { path: '/api/vm/list' })).status).toBe(200);
    const health = await send(h.service.url, { path: '/api/health' });
    expect([health.status, health.text]).toEqual([200, 'ok']);
  });
});

describe('request deadline per route, in a bare app', () => {
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    const app = express();
    app.use(requestTimeout(300));
    const slow = (ms: number, name?: string): express.RequestHandler => async (_req, res) => {
      if (name) res.set('X-Workflow-Id', name);
      await sleep(ms);
      res.type('text/plain').send('ok');
    };
    app.get('/api/vm/:id/status', slow(800));
    app.post('/api/vm/:id/shutdown', ...limitsFor({ long: true }), slow(800, 'vm-120'));
    app.post('/api/vm/:id/start', slow(800, 'vm-121'));
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('a quick read past the deadline: 503', async () => {
    const a = await send(url, { path: '/api/vm/120/status' });
    expect(a.status).toBe(503);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/timed out/) });
  });

  test('an answer that waits for an operation (shutdown, stop, destroy, set/*) gets minutes, not the general deadline', async () => {
    const a = await send(url, { method: 'POST', path: '/api/vm/120/shutdown', headers: { 'Content-Type': 'application/json' } });
    expect([a.status, a.text]).toEqual([200, 'ok']);
  });

  test('a timed-out answer that named its workflow says where to follow it', async () => {
    const a = await send(url, { method: 'POST', path: '/api/vm/121/start', headers: { 'Content-Type': 'application/json' } });
    expect(a.status).toBe(503);
    expect(a.json!.message).toMatch(/workflow vm-121 is still running.*\/api\/workflows\/vm-121/);
  });
});

describe('event streams', () => {
  /** An install that waits for its guest to boot: its stream stays open meanwhile. */
  let install: OpenStream;
  let workflowId: string;
  const eventsPath = () => `/api/vm/install/${workflowId}/events`;

  beforeAll(async () => {
    install = await openStream('/api/vm/install', { os: 'debian', version: '12', name: 'limits' });
    expect(install.status).toBe(200);
    workflowId = (await install.match(/workflow id: (\S+)"/))[1];
    expect(workflowId).toMatch(/^install-/);
  });

  afterAll(async () => {
    install?.close();
    if (!workflowId) return;
    // Cancelled, the install removes the VM it created; wait for that before the harness stops.
    await send(h.service.url, { method: 'POST', path: `/api/vm/install/${workflowId}/cancel`, headers: { 'Content-Type': 'application/json' } });
    await h.service.client.workflow.getHandle(workflowId).result().catch(() => undefined);
  });

  test('an event stream outlives the deadline', async () => {
    expect(install.contentType).toMatch(/^text\/event-stream/);
    const s = await openStream(eventsPath());
    let calls = 0;
    try {
      expect(s.status).toBe(200);
      expect(s.contentType).toMatch(/^text\/event-stream/);
      // The witness: a plain request opened after both streams meets its deadline, so
      // theirs have passed too (same timer, started earlier).
      calls = readCalls(h.sandbox.dir).length;
      // Every call until cleared, not the next one: the install beside may read the cluster
      // first (its guest is booting), and a one-shot fault would be its, not the list's.
      await h.sandbox.injectFault({ command: 'pvesh get /cluster/resources', latencyMs: TIMEOUT_MS + 2000 });
      expect((await send(h.service.url, { path: '/api/vm/list' })).status).toBe(503);
      for (const stream of [install, s]) {
        expect(stream.ended()).toBe(false);
        expect(stream.body()).not.toMatch(/timed out/);
      }
    } finally {
      s.close();
      await h.sandbox.clearFaults();
    }
    await slowCallEnded(calls);
  });

  test(`past ${MAX_STREAMS} open streams a client gets 429 JSON, before anything starts; closing one frees a slot`, async () => {
    const streams: OpenStream[] = [];
    try {
      // The install's own stream is the first of the client's streams.
      for (let i = 1; i < MAX_STREAMS; i++) streams.push(await openWhenFree(eventsPath()));
      expect(streams.map((s) => s.status)).toEqual(Array(MAX_STREAMS - 1).fill(200));

      const refused = await send(h.service.url, { path: eventsPath() });
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBeDefined();
      expect(refused.json).toMatchObject({ success: false, message: expect.stringMatching(/SSE_MAX_PER_CLIENT/) });

      // An install at the cap is refused before its workflow starts.
      const install = await send(h.service.url, {
        path: '/api/vm/install',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ os: 'debian', version: '12' }),
      });
      expect(install.status).toBe(429);
      expect(install.json).toMatchObject({ success: false });

      // Requests that are not streams are not affected.
      const health = await send(h.service.url, { path: '/api/health' });
      expect(health.status).toBe(200);
      const status = await send(h.service.url, { path: '/api/workflows/security-limits-no-such-workflow' });
      expect(status.status).toBe(404);

      streams.pop()!.close();
      const again = await openWhenFree(eventsPath());
      expect(again.status).toBe(200);
      streams.push(again);
    } finally {
      for (const s of streams) s.close();
    }
    // The install the streams watch, nothing else. No event says a workflow was not
    // started, and the count reads Temporal's visibility, which lags a start: a bounded wait.
    await sleep(1000);
    expect(await workflowCount()).toBe(1);
  });

  test(`past ${MAX_TOTAL} open streams in total (SSE_MAX_TOTAL), any client gets 503 JSON, whatever its address`, async () => {
    const streams: OpenStream[] = [];
    try {
      // 127.0.0.1 holds the install's stream and two more (its own cap), 127.0.0.2 two.
      for (let i = 1; i < MAX_STREAMS; i++) streams.push(await openWhenFree(eventsPath()));
      for (let i = 0; i < MAX_TOTAL - MAX_STREAMS; i++) streams.push(await openWhenFree(eventsPath(), '127.0.0.2'));
      expect(streams.map((s) => s.status)).toEqual(Array(MAX_TOTAL - 1).fill(200));

      // A third address, under its own cap, finds the server full.
      const refused = await openStream(eventsPath(), undefined, '127.0.0.3');
      refused.close();
      expect(refused.status).toBe(503);
      const full = await send(h.service.url, { path: eventsPath() });
      expect(full.status).toBe(503);
      expect(full.headers['retry-after']).toBe('10');
      expect(full.json).toEqual({
        success: false,
        message: `too many open event streams: the server already serves ${MAX_TOTAL} (SSE_MAX_TOTAL); retry later`,
      });
      // Requests that are not streams still pass.
      expect((await send(h.service.url, { path: '/api/health' })).status).toBe(200);

      // One stream closed anywhere frees a slot for anyone.
      streams.pop()!.close();
      const again = await openWhenFree(eventsPath(), '127.0.0.3');
      expect(again.status).toBe(200);
      streams.push(again);
    } finally {
      for (const s of streams) s.close();
    }
  });

  test('100 anonymous watchers take at most SSE_MAX_ANONYMOUS slots: an install\'s own stream still opens', async () => {
    // The defaults (20 per client, 100 in all, 50 anonymous), in an app of their own on this worker.
    const config = { ...h.config, http: { ...h.config.http, sseMaxPerClient: 20, sseMaxTotal: 100, sseMaxAnonymous: 50 } };
    const app = createApp({ config, client: h.service.client, knownNodes: ['pve1', 'pve2'], proxmox: cliCluster({}, h.config.mainNode) });
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const streams: OpenStream[] = [];
    let installId = '';
    try {
      // Five addresses, 20 watchers each: every one under its own cap.
      for (let i = 0; i < 100; i++) streams.push(await openStream(eventsPath(), undefined, `127.0.0.${11 + Math.floor(i / 20)}`, base));
      const statuses = streams.map((s) => s.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(50);
      expect(statuses.filter((s) => s === 503)).toHaveLength(50);
      const refused = await send(base, { path: eventsPath(), headers: {} });
      expect(refused.json?.message).toMatch(/SSE_MAX_ANONYMOUS/);

      const install = await openStream('/api/vm/install', { os: 'debian', version: '12', name: 'reserved' }, undefined, base);
      streams.push(install);
      expect(install.status).toBe(200);
      expect(install.contentType).toMatch(/^text\/event-stream/);
      installId = (await install.match(/workflow id: (\S+)"/))[1];
      expect(installId).toMatch(/^install-/);
    } finally {
      for (const s of streams) s.close();
      if (installId) {
        await h.service.client.workflow.getHandle(installId).cancel().catch(() => undefined);
        await h.service.client.workflow.getHandle(installId).result().catch(() => undefined);
      }
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('requests Node refuses get JSON too', () => {
  test('a NUL in a header: 400 JSON', async () => {
    const a = await sendRaw(h.service.url, 'GET /api/health HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 1\x002\r\n\r\n');
    expect(a.status).toBe(400);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/malformed/) });
  });

  test('headers over 16 KiB: 431 JSON', async () => {
    const a = await sendRaw(h.service.url, `GET /api/health HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${'k'.repeat(20_000)}\r\n\r\n`);
    expect(a.status).toBe(431);
    expect(a.json).toMatchObject({ success: false, message: expect.stringMatching(/headers/) });
  });

  test('Content-Length and Transfer-Encoding together (request smuggling): 400 JSON', async () => {
    const a = await sendRaw(
      h.service.url,
      'POST /api/vm/install HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    );
    expect(a.status).toBe(400);
    expect(a.json).toMatchObject({ success: false });
  });
});

describe('findDuplicateKey', () => {
  test.each([
    ['{"a":1,"b":2}', undefined],
    ['{"a":1,"a":2}', { key: 'a', path: '' }],
    ['{"a":{"b":1},"c":{"b":1}}', undefined],
    ['{"a":{"b":1,"b":2}}', { key: 'b', path: 'a' }],
    ['[{"x":1},{"x":1}]', undefined],
    ['{"s":"\\"a\\":1,\\"a\\":2","t":"{\\"k\\""}', undefined],
    ['{"a":1,"\\u0061":2}', { key: 'a', path: '' }],
    ['{"l":[{"y":[1,{"z":1,"z":1}]}]}', { key: 'z', path: 'l.y' }],
  ])('%s', (text, expected) => {
    expect(findDuplicateKey(text)).toEqual(expected);
  });

  test('a deeply nested body does not exhaust the stack', () => {
    const text = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    expect(findDuplicateKey(text)).toBeUndefined();
  });
});
