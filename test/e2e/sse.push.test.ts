import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * In one process with the worker (role all), an install's events reach its stream as the
 * workflow records them, not at the stream's next read: with the reader's pauses set to
 * ten minutes, a whole install still streams in seconds, every event once and in order,
 * and its workflow is queried only a few times (the first read, and reads pushes asked for).
 */

let h: Harness;
const queries = new Map<string, number>();
const TEN_MINUTES = 600_000;

beforeAll(async () => {
  h = await startHarness({}, { readerTiming: { fastMs: TEN_MINUTES, slowMs: TEN_MINUTES, stalledMs: TEN_MINUTES, pushedSlowMs: TEN_MINUTES } });
  const service = h.service.client.workflowService;
  const query = service.queryWorkflow.bind(service);
  service.queryWorkflow = ((request: Parameters<typeof query>[0]) => {
    const id = request.execution?.workflowId ?? '';
    queries.set(id, (queries.get(id) ?? 0) + 1);
    return query(request);
  }) as typeof service.queryWorkflow;
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

test('an install streams to its end by push, with the poll paused for ten minutes', async () => {
  const started = Date.now();
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12' }, timeoutMs: 90_000 });
  const seconds = (Date.now() - started) / 1000;
  const id = String(res.headers['x-workflow-id']);

  expect(res.status).toBe(200);
  expect(res.closed).toBe(true);
  expect(res.events.map((e) => e.id)).toEqual(Array.from({ length: res.events.length }, (_, k) => k + 1));
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-1)?.message).toBe('[*] User: debian');
  expect(seconds).toBeLessThan(90);
  const reads = queries.get(id) ?? 0;
  console.log(`install streamed by push: ${res.events.length} events in ${seconds.toFixed(1)} s, ${reads} progress queries`);
  // A stream that waited for reads would have had one, then nothing for ten minutes.
  expect(reads).toBeGreaterThanOrEqual(1);
  expect(reads).toBeLessThanOrEqual(5);
}, 120_000);
