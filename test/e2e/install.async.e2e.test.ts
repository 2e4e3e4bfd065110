import http from 'node:http';
import { startHarness, Harness } from '../support/harness';

/**
 * `Prefer: respond-async` on an install, end to end (real service, Temporal, sandbox and
 * SSH): automation starts installs with a `202` and polls the status resource, without
 * holding an event stream, so the per-client stream cap does not limit how many it starts.
 */

/** One stream per client: the async installs below are more than it would allow. */
const MAX_STREAMS = 1;
const INSTALLS = 3;

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ SSE_MAX_PER_CLIENT: String(MAX_STREAMS) });
});

afterAll(async () => {
  await h?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer {
  status: number;
  headers: Headers;
  json: any;
}

async function startAsync(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${h.api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async', ...headers },
    body: JSON.stringify(body),
  });
  // The whole answer arrives and the connection is done with: no stream is left open.
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) };
}

async function getStatus(location: string): Promise<any> {
  const res = await fetch(new URL(location, h.service.url));
  expect(res.status).toBe(200);
  return res.json();
}

/** Holds an event stream open (it takes the client's only slot) until `close()`. */
function holdStream(path: string): Promise<{ status: number; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${h.service.url}${path}`, { agent: false }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

interface Snapshot {
  status: string;
  step?: string;
  vmid?: number;
  ip?: string;
}

/** Polls a status resource until its workflow closes; returns every answer seen. */
async function pollUntilClosed(location: string): Promise<{ seen: Snapshot[]; last: any }> {
  const seen: Snapshot[] = [];
  for (let i = 0; i < 1200; i++) {
    const s = await getStatus(location);
    seen.push({ status: s.status, step: s.step, vmid: s.vmid, ip: s.ip });
    if (s.status !== 'RUNNING') return { seen, last: s };
    await sleep(150);
  }
  throw new Error(`${location} still running after the polling budget`);
}

test(`${INSTALLS} installs with Prefer: respond-async answer 202 past a cap of ${MAX_STREAMS} stream, and are followed by polling`, async () => {
  const first = await startAsync({ os: 'debian', version: '12', name: 'async0' });
  expect(first.status).toBe(202);

  // The client's only stream slot is taken by watching the first install...
  const held = await holdStream(`/api/vm/install/${first.json.workflowId}/events`);
  expect(held.status).toBe(200);
  const answers: Answer[] = [first];
  try {
    // ...and a streamed install is refused, while async ones still start.
    const streamed = await fetch(`${h.api}/vm/install`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ os: 'debian', version: '12', name: 'refused' }),
    });
    expect(streamed.status).toBe(429);
    await streamed.text();
    for (let i = 1; i < INSTALLS; i++) answers.push(await startAsync({ os: 'debian', version: '12', name: `async${i}` }));
  } finally {
    held.close();
  }

  for (const a of answers) {
    expect(a.status).toBe(202);
    expect(a.headers.get('content-type')).toMatch(/^application\/json/);
    expect(a.headers.get('preference-applied')).toBe('respond-async');
    expect(a.json.workflowId).toMatch(/^install-/);
    expect(a.headers.get('x-workflow-id')).toBe(a.json.workflowId);
    expect(a.headers.get('location')).toBe(`/api/vm/install/${a.json.workflowId}`);
    expect(a.json).toEqual({ success: true, workflowId: a.json.workflowId, status: a.headers.get('location') });
  }
  expect(new Set(answers.map((a) => a.json.workflowId)).size).toBe(INSTALLS);

  const polls = await Promise.all(answers.map((a) => pollUntilClosed(a.headers.get('location')!)));
  const vmids = new Set<number>();
  for (const { seen, last } of polls) {
    expect(last).toMatchObject({ success: true, status: 'COMPLETED', step: 'VM initialization > finalizing' });
    expect(last.ip).toBe(`127.0.0.${last.vmid}`);
    expect(last.result).toMatchObject({ vmid: last.vmid, ip: last.ip, user: 'debian', node: h.config.mainNode });
    vmids.add(last.vmid);
    // Every answer names a step; the VMID and IP, once there, are the final ones.
    for (const s of seen) {
      expect(s.step).toMatch(/^[^>]+ > .+$/);
      if (s.vmid !== undefined) expect(s).toMatchObject({ vmid: last.vmid, ip: last.ip });
      else expect(s.status).toBe('RUNNING');
    }
  }
  expect(vmids.size).toBe(INSTALLS);

  // The VMID and IP are reported while the install still runs (the VM is being built),
  // not only in the result: the polls above saw it for at least one of them.
  const runningWithVm = polls.flatMap((p) => p.seen).filter((s) => s.status === 'RUNNING' && s.vmid !== undefined);
  expect(runningWithVm.length).toBeGreaterThan(0);
  const stepsSeen = new Set(polls.flatMap((p) => p.seen.map((s) => s.step)));
  expect(stepsSeen.size).toBeGreaterThan(1);
});

test('Idempotency-Key: the same request is the same install (202 again), another request under the key is 422', async () => {
  const key = `async-key-${Date.now()}`;
  const body = { os: 'debian', version: '12', name: 'keyed' };
  const a = await startAsync(body, { 'Idempotency-Key': key });
  expect(a.status).toBe(202);
  const again = await startAsync(body, { 'Idempotency-Key': key });
  expect(again.status).toBe(202);
  expect(again.json.workflowId).toBe(a.json.workflowId);
  expect(again.headers.get('location')).toBe(a.headers.get('location'));

  const other = await startAsync({ ...body, name: 'other' }, { 'Idempotency-Key': key });
  expect(other.status).toBe(422);
  expect(other.json).toMatchObject({ success: false, workflowId: a.json.workflowId, message: expect.stringContaining(key) });
  expect(other.headers.get('preference-applied')).toBeNull();

  const { last } = await pollUntilClosed(a.headers.get('location')!);
  expect(last.status).toBe('COMPLETED');
  // Still the same install once it has finished.
  const after = await startAsync(body, { 'Idempotency-Key': key });
  expect(after.status).toBe(202);
  expect(after.json.workflowId).toBe(a.json.workflowId);
});

test('a bad body with Prefer: respond-async is 400 naming the field, and starts nothing', async () => {
  const bad = await startAsync({ os: 'debian', version: '12', cpu: 'many' });
  expect(bad.status).toBe(400);
  expect(bad.json.message).toMatch(/cpu/);
  expect(bad.headers.get('location')).toBeNull();
});
