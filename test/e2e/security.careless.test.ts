import { execa } from 'execa';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { send } from '../support/securityHttp';
import { requestSse } from '../support/sse';

/**
 * Careless clients and other applications' workflows (issue: security, round two): each
 * request of the issue, the new answer, and nothing started or changed on the cluster.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

const JSON_CT = { 'Content-Type': 'application/json' };

async function workflowCount(): Promise<number> {
  return (await h.service.client.workflow.count(`TaskQueue = '${h.config.temporal.taskQueue}'`)).count;
}

/** Calls that create or change something on the cluster since `n`. */
async function changesSince(n: number) {
  return (await h.sandbox.calls()).slice(n).filter((c) => c.argv[0] === 'qm' && !['config', 'status', 'list'].includes(c.argv[1]));
}

describe("only QemuRun's own workflows", () => {
  const FOREIGN = 'foreign-wf-1';
  const OTHER_QUEUE = `someone-else-${process.pid}`;

  beforeAll(async () => {
    // Another application's workflow in the same namespace: no worker of ours polls its queue.
    await h.service.client.workflow.start('someoneElsesWorkflow', { taskQueue: OTHER_QUEUE, workflowId: FOREIGN, args: [] });
    // Even one that borrows our type name, on its own queue.
    await h.service.client.workflow.start('installVm', { taskQueue: OTHER_QUEUE, workflowId: 'foreign-wf-2', args: [] });
  });

  afterAll(async () => {
    for (const id of [FOREIGN, 'foreign-wf-2']) await h.service.client.workflow.getHandle(id).terminate('test over').catch(() => undefined);
  });

  test.each([FOREIGN, 'foreign-wf-2'])('%s: read, events and cancel are 404, and it is not cancel-requested', async (id) => {
    expect(await apiCall(h.api, 'GET', `/workflows/${id}`)).toEqual({ status: 404, json: { success: false, message: `no workflow ${id}` } });
    expect((await send(h.service.url, { path: `/api/workflows/${id}/events` })).status).toBe(404);
    for (const p of [`/vm/install/${id}/cancel`, `/workflows/${id}/cancel`]) {
      expect(await apiCall(h.api, 'POST', p)).toEqual({ status: 404, json: { success: false, message: `no workflow ${id}` } });
    }
    const history = await h.service.client.workflow.getHandle(id).fetchHistory();
    expect(history.events?.some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(false);
    expect((await h.service.client.workflow.getHandle(id).describe()).status.name).toBe('RUNNING');
  });
});

describe('Idempotency-Key and finished workflows', () => {
  const key = `careless-${Date.now()}`;
  const body = { os: 'debian', version: '12', name: 'careless', passwd: 'first-Passw0rd' };
  let workflowId: string;

  beforeAll(async () => {
    const res = await requestSse(`${h.api}/vm/install`, { body, headers: { 'Idempotency-Key': key } });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    workflowId = res.headers['x-workflow-id'] as string;
  });

  test.each([
    ['another name', { ...body, name: 'other' }],
    ['another password', { ...body, passwd: 'second-Passw0rd' }],
    ['more memory', { ...body, ram: 2048 }],
  ])('the same key with %s: 422 naming the key; nothing starts', async (_label, other) => {
    const n = (await h.sandbox.calls()).length;
    const count = await workflowCount();
    const res = await send(h.service.url, { path: '/api/vm/install', headers: { ...JSON_CT, 'Idempotency-Key': key }, body: JSON.stringify(other) });
    expect(res.status).toBe(422);
    expect(res.json).toEqual({
      success: false,
      message: `Idempotency-Key "${key}" was already used for another install request (workflow ${workflowId}); use a new key for a different request`,
      workflowId,
    });
    expect(res.text).not.toContain('Passw0rd');
    expect(await changesSince(n)).toEqual([]);
    expect(await workflowCount()).toBe(count);
  });

  test('the same key with the same body still attaches to the install', async () => {
    const again = await requestSse(`${h.api}/vm/install`, { body, headers: { 'Idempotency-Key': key } });
    expect(again.status).toBe(200);
    expect(again.headers['x-workflow-id']).toBe(workflowId);
    expect(again.closed).toBe(true);
  });

  test('cancelling a completed install or operation is 409; nothing is cancel-requested', async () => {
    const res = await apiCall(h.api, 'POST', `/vm/install/${workflowId}/cancel`);
    expect(res).toEqual({
      status: 409,
      json: { success: false, message: `workflow ${workflowId} has already finished (COMPLETED); there is nothing to cancel`, status: 'COMPLETED' },
    });
    await execa('qm', ['create', '160', '--name', 'done'], { env: { ...process.env, ...h.sandbox.envFor('pve1') } });
    expect((await apiCall(h.api, 'POST', '/vm/160/adopt')).status).toBe(200);
    const op = await apiCall(h.api, 'POST', '/workflows/vm-160/cancel');
    expect(op.status).toBe(409);
    expect(op.json.message).toBe('workflow vm-160 has already finished (COMPLETED); there is nothing to cancel');
    // Ours, so still readable.
    expect(await apiCall(h.api, 'GET', '/workflows/vm-160')).toMatchObject({ status: 200, json: { type: 'vmAdopt', status: 'COMPLETED' } });
  });
});

describe('careless requests are 400, and nothing reaches the cluster', () => {
  let n: number;
  let count: number;
  beforeAll(async () => {
    n = (await h.sandbox.calls()).length;
    count = await workflowCount();
  });

  test.each([
    ['POST', '/vm/0240/stop'],
    ['POST', '/vm/0240/destroy'],
    ['POST', '/vm/0240/rebuild'],
    ['GET', '/vm/0240/status'],
    ['POST', '/vm/00240/adopt'],
  ])('%s %s: leading zeros are 400', async (method, p) => {
    expect(await apiCall(h.api, method, p)).toEqual({
      status: 400,
      json: { success: false, message: 'please check your input: id: must be a VMID without leading zeros' },
    });
  });

  test('"pubkey": "" is 400 naming the field', async () => {
    for (const pubkey of ['', '  ', '\n']) {
      const res = await apiCall(h.api, 'POST', '/vm/install', { os: 'debian', version: '12', pubkey });
      expect(res).toEqual({
        status: 400,
        json: { success: false, message: 'please check your input: pubkey: must not be empty: send an OpenSSH public key, or leave the field out' },
      });
    }
  });

  test('"disk": "99999G" is more than the storage has free: 400', async () => {
    const res = await apiCall(h.api, 'POST', '/vm/install', { os: 'debian', version: '12', disk: '99999G' });
    expect(res.status).toBe(400);
    expect(res.json.message).toMatch(/^please check your input: disk: 99999G is more than the free space of storage 'local-lvm' \(\d+G free\)$/);
  });

  test('a UTF-8 byte order mark before the JSON is 400', async () => {
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ os: 'debian', version: '12' }))]);
    const res = await send(h.service.url, { path: '/api/vm/install', headers: JSON_CT, body: bom });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ success: false, message: 'please check your input: body starts with a byte order mark (U+FEFF); send the JSON without it' });
  });

  test('/codec/decode refuses duplicate keys like every other body', async () => {
    const res = await send(h.service.url, { path: '/codec/decode', headers: JSON_CT, body: '{"payloads": [], "payloads": [{"data": ""}]}' });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ success: false, message: 'please check your input: body repeats the key "payloads"' });
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"payloads": []}')]);
    expect((await send(h.service.url, { path: '/codec/decode', headers: JSON_CT, body: bom })).status).toBe(400);
    // a well-formed body still decodes
    expect((await send(h.service.url, { path: '/codec/decode', headers: JSON_CT, body: '{"payloads": []}' })).status).toBe(200);
  });

  test('none of them started a workflow or touched a VM', async () => {
    expect(await changesSince(n)).toEqual([]);
    expect(await workflowCount()).toBe(count);
  });
});
