import crypto from 'node:crypto';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';

/**
 * Every stream of a workflow reads from one progress reader, so watchers cost nothing
 * more: two installs run side by side, one followed by a single stream and the other by
 * twenty, and the progress queries that reach Temporal are counted per workflow at the
 * client's gRPC boundary. Every stream still gets exactly the events after its own
 * Last-Event-ID.
 */

let h: Harness;
const queries = new Map<string, number>();
/** The most queries of one workflow in flight at once: one reader asks one at a time. */
const inFlight = new Map<string, number>();
const maxInFlight = new Map<string, number>();

beforeAll(async () => {
  // 21 streams from one address: above the default per-client cap.
  h = await startHarness({ SSE_MAX_PER_CLIENT: '0' });
  const service = h.service.client.workflowService;
  const query = service.queryWorkflow.bind(service);
  service.queryWorkflow = ((request: Parameters<typeof query>[0]) => {
    const id = request.execution?.workflowId ?? '';
    queries.set(id, (queries.get(id) ?? 0) + 1);
    inFlight.set(id, (inFlight.get(id) ?? 0) + 1);
    maxInFlight.set(id, Math.max(maxInFlight.get(id) ?? 0, inFlight.get(id)!));
    const done = () => inFlight.set(id, inFlight.get(id)! - 1);
    const pending = query(request);
    pending.then(done, done);
    return pending;
  }) as typeof service.queryWorkflow;
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

/** The workflow id the API gives an install sent with this Idempotency-Key. */
const installId = (key: string) => `install-key-${crypto.createHash('sha256').update(key).digest('hex').slice(0, 32)}`;

/** Starts an install, drops its stream after the first event, then opens `watchers` streams re-attached after it. */
async function installWatchedBy(watchers: number): Promise<{ id: string; first: SseResponse; streams: SseResponse[] }> {
  const key = `watched-by-${watchers}-${Date.now()}`;
  const first = await requestSse(`${h.api}/vm/install`, {
    body: { os: 'debian', version: '12' },
    headers: { 'Idempotency-Key': key },
    stopAfter: 1,
  });
  const id = installId(key);
  expect(first.headers['x-workflow-id']).toBe(id);
  // Half resume after the event seen, half replay from the start.
  const streams = await Promise.all(
    Array.from({ length: watchers }, (_, i) =>
      requestSse(`${h.api}/workflows/${id}/events`, { headers: i % 2 === 0 ? { 'Last-Event-ID': '1' } : {} }),
    ),
  );
  return { id, first, streams };
}

test('20 streams on one install issue no more progress queries than 1 stream, and each gets its exact events', async () => {
  const [one, twenty] = await Promise.all([installWatchedBy(1), installWatchedBy(20)]);

  for (const { first, streams } of [one, twenty]) {
    expect(first.events.map((e) => e.id)).toEqual([1]);
    const full = streams.find((s) => s.events[0]?.id === 1) ?? streams[0];
    for (const [i, s] of streams.entries()) {
      expect(s.closed).toBe(true);
      const from = i % 2 === 0 ? 2 : 1;
      // Consecutive ids from the resume point to the end, no gap, no repeat.
      expect(s.events.map((e) => e.id)).toEqual(Array.from({ length: s.events.length }, (_, k) => from + k));
      expect(s.events.at(-1)?.message).toBe('[*] User: debian');
      expect(s.events.filter((e) => e.status === 'error')).toEqual([]);
      expect(s.events).toEqual(full.events.filter((e) => e.id! >= from));
    }
  }

  const readsOne = queries.get(one.id) ?? 0;
  const readsTwenty = queries.get(twenty.id) ?? 0;
  console.log(`progress queries: 1 stream ${readsOne}, 20 streams ${readsTwenty}`);
  expect(readsOne).toBeGreaterThan(0);
  // Exact: twenty streams never have more than the one read of their shared reader out.
  expect(maxInFlight.get(twenty.id)).toBe(1);
  expect(maxInFlight.get(one.id)).toBe(1);
  // The two installs run side by side but not in lockstep, and a longer run reads a few
  // more times while quiet. Twenty streams polling on their own would cost ~20 times as many.
  expect(readsTwenty).toBeLessThanOrEqual(Math.ceil(readsOne * 1.25) + 2);
}, 240_000);
