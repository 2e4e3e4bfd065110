import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiClient } from '../../cli/client';
import { ApiError, followEvents, type StreamEvent } from '../../cli/events';

/**
 * Re-attaching, against a small HTTP server that plays a server's failures in turn: a
 * stream that ends before `event: close`, a moment of 503, then the rest.
 */

const frame = (id: number, message: string) => `id: ${id}\ndata: ${JSON.stringify({ step: 'VM start > start', status: 'processing', message })}\n\n`;

async function serve(answers: Array<(req: http.IncomingMessage, res: http.ServerResponse) => void>) {
  const seen: Array<{ method?: string; url?: string; lastEventId?: string; auth?: string }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, lastEventId: req.headers['last-event-id'] as string | undefined, auth: req.headers.authorization });
    (answers[seen.length - 1] ?? ((_q, r) => r.writeHead(500).end()))(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise((r) => server.close(r)) };
}

const sse = (res: http.ServerResponse, body: string, workflowId = 'vm-120') => {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'X-Workflow-Id': workflowId });
  res.end(body);
};

test('a stream cut short re-attaches after its last event, through a 503, and ends at event: close', async () => {
  const server = await serve([
    (_q, res) => sse(res, frame(1, 'one') + frame(2, 'two') + 'id: 3\ndata: {"step":"x", "sta'),
    (_q, res) => res.writeHead(503, { 'Content-Type': 'application/json' }).end('{"success":false,"message":"starting"}'),
    (_q, res) => sse(res, frame(3, 'three') + 'event: close\ndata: {}\n\n'),
  ]);
  try {
    const client = new ApiClient({ url: `${server.url}/api`, token: 's3cret' });
    const events: StreamEvent[] = [];
    const retries: string[] = [];
    const first = await client.send('POST', '/api/vm/120/start');
    const result = await followEvents(client, first, { event: (e) => events.push(e), reconnecting: (n, after, why) => retries.push(`${n} ${after} ${why}`) }, { retryDelayMs: 10 });
    expect(result).toMatchObject({ workflowId: 'vm-120', closed: true, last: { id: 3, message: 'three' } });
    expect(events.map((e) => e.id)).toEqual([1, 2, 3]);
    expect(server.seen).toEqual([
      { method: 'POST', url: '/api/vm/120/start', auth: 'Bearer s3cret' },
      { method: 'GET', url: '/api/workflows/vm-120/events', lastEventId: '2', auth: 'Bearer s3cret' },
      { method: 'GET', url: '/api/workflows/vm-120/events', lastEventId: '2', auth: 'Bearer s3cret' },
    ]);
    expect(retries).toEqual(['1 2 the stream ended before the operation did', '2 2 the server answered 503: starting']);
  } finally {
    await server.close();
  }
});

test('a refusal is not retried: the first answer that is not a stream is the error', async () => {
  const server = await serve([(_q, res) => res.writeHead(409, { 'Content-Type': 'application/json' }).end('{"success":false,"message":"VM 120 is busy"}')]);
  try {
    const client = new ApiClient({ url: server.url });
    const first = await client.send('POST', '/api/vm/120/start');
    await expect(followEvents(client, first, { event: () => undefined })).rejects.toEqual(new ApiError(409, { success: false, message: 'VM 120 is busy' }));
    expect(server.seen).toHaveLength(1);
  } finally {
    await server.close();
  }
});

test('gives up after its retries, saying the operation did not end', async () => {
  const server = await serve([]);
  try {
    const client = new ApiClient({ url: server.url });
    const result = await followEvents(client, { workflowId: 'install-x', after: 7 }, { event: () => undefined }, { retries: 2, retryDelayMs: 5 });
    expect(result).toEqual({ workflowId: 'install-x', closed: false, last: undefined });
    expect(server.seen.map((s) => s.lastEventId)).toEqual(['7', '7', '7']);
  } finally {
    await server.close();
  }
});
