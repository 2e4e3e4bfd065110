import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { send } from '../support/securityHttp';

/**
 * The access guard with no proxy configured (the default): X-Forwarded-For is ignored, so
 * nobody can claim an allowed address with a header. ALLOW_IPS names an address the test,
 * connecting from loopback, does not have.
 */

const CLIENT = '203.0.113.7';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ ALLOW_IPS: CLIENT, DIAGNOSTICS_IPS: '127.0.0.1,127.0.0.3' });
});

afterAll(async () => {
  await h?.stop();
});

test.each([
  ['/vm/9999/stop', undefined],
  ['/vm/9999/start', undefined],
  ['/vm/9999/set/cpu', { cpu: 2 }],
  ['/vm/9999/adopt', undefined],
  ['/cluster/cpu/refresh', undefined],
  ['/vm/install', { os: 'debian', version: '12' }],
])('POST %s with a spoofed X-Forwarded-For is 403 JSON', async (p, body) => {
  for (const xff of [CLIENT, `${CLIENT}, ${CLIENT}`, undefined]) {
    const res = await fetch(`${h.api}${p}`, {
      method: 'POST',
      headers: { ...(xff ? { 'X-Forwarded-For': xff } : {}), 'Content-Type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    });
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ success: false, message: 'client 127.0.0.1 is not in ALLOW_IPS' });
  }
});

test('a refused install starts no workflow and streams nothing', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12' }, headers: { 'X-Forwarded-For': CLIENT } });
  expect(res.status).toBe(403);
  expect(res.events).toEqual([]);
  expect(res.headers['x-workflow-id']).toBeUndefined();
});

test('reads stay open', async () => {
  expect(await (await fetch(`${h.api}/health`)).text()).toBe('ok');
  expect((await fetch(`${h.api}/vm/list`)).status).toBe(200);
});

test('diagnostics answer the addresses of DIAGNOSTICS_IPS only, not every loopback address', async () => {
  // 127.0.0.2 is this machine too, but not an address the operator named: in sandbox mode it
  // is where a VM's address would be, and a local proxy or container may connect from one.
  for (const [from, metrics, ready] of [
    ['127.0.0.1', 200, ['ready', 'checks']],
    ['127.0.0.3', 200, ['ready', 'checks']],
    ['127.0.0.2', 403, ['ready']],
  ] as const) {
    const m = await send(h.service.url, { path: '/metrics', from });
    expect({ from, status: m.status, counts: /qemurun_/.test(m.text) }).toEqual({ from, status: metrics, counts: metrics === 200 });
    const r = await send(h.service.url, { path: '/api/health/ready', from });
    expect({ from, keys: Object.keys(r.json ?? {}) }).toEqual({ from, keys: ready });
  }
});
