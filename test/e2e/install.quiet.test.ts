import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { activityAttempts } from '../support/history';

/**
 * A command that prints nothing for longer than its activity's heartbeat timeout (the
 * guest group's is 30 s) is not a dead worker. Here the guest's first apt-get waits 75 s
 * on a "slow mirror" in silence (more than the timeout plus the SDK's heartbeat throttle,
 * 0.8 of it, which can delay the last heartbeat the server saw); the init script must run
 * once, not be restarted beside itself by a heartbeat timeout.
 */

const SILENCE_MS = 75_000;
let h: Harness;

beforeAll(async () => {
  h = await startHarness({}, { packageSilenceMs: SILENCE_MS });
});

afterAll(async () => {
  await h?.stop();
});

test('an init script silent for longer than the heartbeat timeout runs once and the install succeeds', async () => {
  const started = Date.now();
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-1)?.message).toBe('[*] User: debian');
  const attempts = await activityAttempts(h.service.client, res.headers['x-workflow-id'] as string);
  expect(attempts.runInitScript).toBe(1);
  expect(Date.now() - started).toBeGreaterThan(SILENCE_MS);
  const vmid = Number(/\[\*\] VMID: (\d+)/.exec(res.body)![1]);
  const runs = (await h.sandbox.guestLog(vmid)).split('\n').filter((l) => / sudo bash -s$/.test(l));
  expect(runs).toHaveLength(1);
}, 240_000);
