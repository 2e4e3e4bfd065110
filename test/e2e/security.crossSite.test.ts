import { execa } from 'execa';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { send } from '../support/securityHttp';

/**
 * Cross-site requests: a page on another site makes a visitor's browser send "simple"
 * requests (no preflight) to the API. With API_TOKEN unset (the default) they used to run:
 * `Origin: http://evil.example`, `Content-Type: text/plain` or a form type, empty body, on
 * stop, destroy and rebuild. Each is now refused before anything runs, and the VM is as
 * it was.
 */

let h: Harness;
const VMID = 113;
const EVIL = 'http://evil.example';
const UI = 'https://ui.example:8443';

beforeAll(async () => {
  h = await startHarness({ ALLOW_ORIGINS: UI });
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
});

afterAll(async () => {
  await h?.stop();
});

async function vmState(): Promise<{ config: string; status: string }> {
  const env = { ...process.env, ...h.sandbox.envFor(h.config.mainNode) };
  const config = (await execa('qm', ['config', String(VMID)], { env })).stdout;
  const status = (await execa('qm', ['status', String(VMID)], { env })).stdout;
  return { config, status };
}

async function vmWorkflows(): Promise<number> {
  const { count } = await h.service.client.workflow.count(`TaskQueue = '${h.config.temporal.taskQueue}' AND WorkflowId = 'vm-${VMID}'`);
  return count;
}

const SIMPLE_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'];
const OPS = [`/api/vm/${VMID}/stop`, `/api/vm/${VMID}/destroy`, `/api/vm/${VMID}/rebuild`];

test.each(OPS)('%s from Origin: http://evil.example with a simple type and no body is 403; the VM is untouched', async (p) => {
  const before = await vmState();
  for (const type of SIMPLE_TYPES) {
    const a = await send(h.service.url, { method: 'POST', path: p, headers: { Origin: EVIL, 'Content-Type': type, 'Content-Length': '0' } });
    expect({ type, status: a.status }).toEqual({ type, status: 403 });
    expect(a.json).toEqual({ success: false, message: `origin "${EVIL}" may not change anything here` });
    expect(a.headers['access-control-allow-origin']).toBeUndefined();
  }
  // Even a JSON type (which a browser would have to preflight first) does not pass from there.
  const json = await send(h.service.url, { method: 'POST', path: p, headers: { Origin: EVIL, 'Content-Type': 'application/json' }, body: '{}' });
  expect(json.status).toBe(403);
  expect(await vmState()).toEqual(before);
  expect(await vmWorkflows()).toBe(0);
});

test('a page whose name was made to resolve to the API (DNS rebinding) is not the API\'s own origin', async () => {
  const port = new URL(h.service.url).port;
  const a = await send(h.service.url, {
    method: 'POST',
    path: `/api/vm/${VMID}/stop`,
    headers: { Host: `evil.example:${port}`, Origin: `http://evil.example:${port}`, 'Content-Type': 'application/json' },
  });
  expect(a.status).toBe(403);
  expect((await vmState()).status).toBe('status: running');
});

test('Origin: null (a sandboxed frame, a file:// page) is refused too', async () => {
  const a = await send(h.service.url, { method: 'POST', path: `/api/vm/${VMID}/stop`, headers: { Origin: 'null', 'Content-Type': 'text/plain' } });
  expect(a.status).toBe(403);
});

test('Sec-Fetch-Site: cross-site without an Origin is refused', async () => {
  const a = await send(h.service.url, {
    method: 'POST',
    path: `/api/vm/${VMID}/stop`,
    headers: { 'Sec-Fetch-Site': 'cross-site', 'Content-Type': 'application/json' },
  });
  expect(a.status).toBe(403);
  expect(a.json!.message).toMatch(/Sec-Fetch-Site: cross-site/);
  expect((await vmState()).status).toBe('status: running');
});

test.each(OPS)('%s without Origin but with a simple type is 415: a browser could send it without asking', async (p) => {
  const before = await vmState();
  for (const type of SIMPLE_TYPES) {
    const a = await send(h.service.url, { method: 'POST', path: p, headers: { 'Content-Type': type, 'Content-Length': '0' } });
    expect({ type, status: a.status }).toEqual({ type, status: 415 });
    expect(a.json!.message).toMatch(/Content-Type must be application\/json/);
  }
  // A body without a type, or with the own origin and no type, is refused as well.
  const untyped = await send(h.service.url, { method: 'POST', path: p, body: '{}' });
  expect(untyped.status).toBe(415);
  const ownNoType = await send(h.service.url, { method: 'POST', path: p, headers: { Origin: new URL(h.service.url).origin, 'Content-Length': '0' } });
  expect(ownNoType.status).toBe(415);
  expect(await vmState()).toEqual(before);
  expect(await vmWorkflows()).toBe(0);
});

test('a schedule cannot be made, changed or deleted cross-site either', async () => {
  for (const [method, p] of [
    ['POST', '/api/schedules'],
    ['PATCH', '/api/schedules/rebuild-vm-113'],
    ['DELETE', '/api/schedules/rebuild-vm-113'],
    ['POST', '/api/vm/install'],
  ] as const) {
    const a = await send(h.service.url, { method, path: p, headers: { Origin: EVIL, 'Content-Type': 'text/plain' }, body: '{"vmid":113,"interval":"1d"}' });
    expect({ p, status: a.status }).toEqual({ p, status: 403 });
  }
});

test('the API\'s own origin, and an origin named in ALLOW_ORIGINS, pass with a JSON type; reads stay open cross-site', async () => {
  const own = new URL(h.service.url).origin;
  for (const origin of [own, UI]) {
    // VM 9999 does not exist: a 404 means the request got past the cross-site check.
    const a = await send(h.service.url, { method: 'POST', path: '/api/vm/9999/stop', headers: { Origin: origin, 'Content-Type': 'application/json' } });
    expect({ origin, status: a.status }).toEqual({ origin, status: 404 });
  }
  const read = await send(h.service.url, { path: `/api/vm/${VMID}/status`, headers: { Origin: EVIL } });
  expect([read.status, read.text]).toEqual([200, 'running']);
});

test('a page on another loopback address, or a private one CORS lets read, may not change anything', async () => {
  const port = new URL(h.service.url).port;
  for (const origin of [`http://127.0.0.2:${port}`, 'http://127.0.0.1:5173', `http://localhost:${Number(port) + 1}`]) {
    const a = await send(h.service.url, { method: 'POST', path: `/api/vm/${VMID}/stop`, headers: { Origin: origin, 'Content-Type': 'application/json' } });
    expect({ origin, status: a.status, message: a.json?.message }).toEqual({ origin, status: 403, message: `origin "${origin}" may not change anything here` });
  }
  expect((await vmState()).status).toBe('status: running');
  expect(await vmWorkflows()).toBe(0);
});

test('a seed client\'s POST with no Origin, no body and no Content-Type runs (last: it stops the VM)', async () => {
  const a = await send(h.service.url, { method: 'POST', path: `/api/vm/${VMID}/stop` });
  expect([a.status, a.text]).toEqual([200, 'ok']);
  expect((await vmState()).status).toBe('status: stopped');
});
