import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * Command output is streamed in batches (one signal per second), so a noisy init script
 * keeps the workflow's history small while every line still reaches the client.
 */

let h: Harness;

beforeAll(async () => {
  // The guests' apt-get prints 1,700 lines per call; the Debian script calls it 3 times.
  h = await startHarness({}, { packageOutputLines: 1700 });
});

afterAll(async () => {
  await h?.stop();
});

test('an install whose init script prints 5,000 lines stays under 1,000 history events', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const scriptLines = res.events.filter((e) => e.step === 'VM initialization > init script' && e.message.startsWith('Get:'));
  expect(scriptLines.length).toBeGreaterThanOrEqual(5000);
  // lines arrive in order
  const first = scriptLines.slice(0, 1700).map((e) => e.message.split(' ')[0]);
  expect(first).toEqual(Array.from({ length: 1700 }, (_, i) => `Get:${i + 1}`));

  const history = await h.service.client.workflow.getHandle(res.headers['x-workflow-id'] as string).fetchHistory();
  expect(history.events!.length).toBeLessThan(1000);
}, 180_000);
