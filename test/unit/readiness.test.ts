import { checkReadiness, readinessProbe, type ReadinessCheck } from '../../lib/readiness';

function check(name: string, fails?: string): ReadinessCheck & { calls: number } {
  const c = {
    name,
    calls: 0,
    async check() {
      c.calls++;
      if (fails) throw new Error(`${fails}\nsecond line`);
    },
  };
  return c;
}

test('a report names every dependency that is down, with the first line of why', async () => {
  const report = await checkReadiness([check('Temporal (127.0.0.1:7233)', 'connect ECONNREFUSED'), check('worker'), check('node pve2', 'timed out')]);
  expect(report.ready).toBe(false);
  expect(report.message).toBe('not ready: Temporal (127.0.0.1:7233) is down: connect ECONNREFUSED; node pve2 is down: timed out');
  expect(report.checks).toEqual({
    'Temporal (127.0.0.1:7233)': 'down: connect ECONNREFUSED',
    worker: 'up',
    'node pve2': 'down: timed out',
  });
});

test('all up is ready, without a message', async () => {
  expect(await checkReadiness([check('worker'), check('node pve1')])).toEqual({ ready: true, checks: { worker: 'up', 'node pve1': 'up' } });
});

test('callers arriving together share one round of checks, and a fresh one runs after maxAgeMs', async () => {
  const node = check('node pve1');
  const probe = readinessProbe([node], 50);
  await Promise.all([probe(), probe(), probe()]);
  expect(node.calls).toBe(1);
  await probe();
  expect(node.calls).toBe(1);
  await new Promise((r) => setTimeout(r, 80));
  await probe();
  expect(node.calls).toBe(2);
});
