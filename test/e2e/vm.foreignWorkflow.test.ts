import { Client } from '@temporalio/client';
import { VM_ID } from '../../contract';
import { dataConverterFor } from '../../lib/temporal/codec';
import { codecWith, randomKey } from '../fixtures/codec/keys';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';

/**
 * A workflow in the namespace that carries a VM's VmId but whose memo was sealed with a key
 * this deployment does not hold (another deployment on the namespace, a key dropped too
 * early after rotation) does not hold the VM: an operation on it goes ahead, and the
 * service's log names that workflow and the missing key id. Nor is it one of the service's
 * own: reading it is a 404, with the same warning (real Temporal dev server, sandbox cluster).
 */

let h: Harness;
let vmid: number;
let foreign: Client;
const FOREIGN_KEY_ID = `elsewhere-${process.pid}`;
const FOREIGN_ID = `install-elsewhere-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  h = await startHarness();
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', name: 'held' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);

  const { client } = h.service;
  foreign = new Client({
    connection: client.connection,
    namespace: h.config.temporal.namespace,
    dataConverter: dataConverterFor(codecWith([[FOREIGN_KEY_ID, randomKey()]])),
  });
  // An install as another deployment starts one: its input and memo sealed with its own key,
  // on a task queue no worker of this test polls, so it stays running.
  await foreign.workflow.start('installVm', {
    taskQueue: `elsewhere-${process.pid}-${Date.now()}`,
    workflowId: FOREIGN_ID,
    args: [{}],
    memo: { request: { name: 'elsewhere' } },
    typedSearchAttributes: [{ key: VM_ID, value: vmid }],
  });
  // Visibility lags behind the start: wait until a VmId query finds it, as the API's does.
  const query = `VmId = ${vmid} AND ExecutionStatus = 'Running' AND WorkflowId = '${FOREIGN_ID}'`;
  for (let i = 0; i < 100; i++) {
    const { count } = await client.workflowService.countWorkflowExecutions({ namespace: h.config.temporal.namespace, query });
    if (Number(count) === 1) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}, 180_000);

afterAll(async () => {
  await foreign?.workflow
    .getHandle(FOREIGN_ID)
    .terminate('test over')
    .catch(() => undefined);
  await h?.stop();
});

/** What this process writes to stdout (where the service logs) while `run` runs. */
async function stdoutDuring<T>(run: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const original = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: unknown, ...rest: unknown[]) => {
    lines.push(Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk));
    return (original as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  try {
    return { result: await run(), lines };
  } finally {
    process.stdout.write = original;
  }
}

test('stop goes ahead although a workflow on the VM has a memo the service cannot decode, and the log names it', async () => {
  // The SDK's own listing decodes every memo and ends at this one (it was a 500 for the stop).
  const sdkListing = async () => {
    for await (const wf of h.service.client.workflow.list({ query: `VmId = ${vmid}` })) void wf;
  };
  await expect(sdkListing()).rejects.toThrow(new RegExp(`unknown key id "${FOREIGN_KEY_ID}"`));

  const { result: res, lines } = await stdoutDuring(() => apiCall(h.api, 'POST', `/vm/${vmid}/stop`));
  expect(res).toEqual({ status: 200, json: 'ok' });
  expect((await apiCall(h.api, 'GET', `/vm/${vmid}/status`)).json).toBe('stopped');

  const warnings = lines.flatMap((l) => l.split('\n')).filter((l) => l.includes(FOREIGN_ID));
  expect(warnings).toHaveLength(1);
  const warning = JSON.parse(warnings[0]) as Record<string, unknown>;
  expect(warning).toMatchObject({ level: 40, workflowId: FOREIGN_ID, workflowType: 'installVm', vmid });
  expect(warning.reason).toMatch(new RegExp(`unknown key id "${FOREIGN_KEY_ID}".*ENCRYPTION_KEYS`));
  expect(lines.join('')).not.toMatch(/request failed/);

  // Still running: the service left it alone.
  expect((await foreign.workflow.getHandle(FOREIGN_ID).describe()).status.name).toBe('RUNNING');
});

test('GET of a workflow whose memo the service cannot decode is a 404, and the log names it', async () => {
  // describe() decodes the memo: this was a 500 "internal error".
  const { result: res, lines } = await stdoutDuring(() => apiCall(h.api, 'GET', `/workflows/${FOREIGN_ID}`));
  expect(res).toEqual({ status: 404, json: { success: false, message: `no workflow ${FOREIGN_ID}` } });
  expect((await apiCall(h.api, 'GET', `/vm/install/${FOREIGN_ID}`)).status).toBe(404);

  const warnings = lines.flatMap((l) => l.split('\n')).filter((l) => l.includes(FOREIGN_ID));
  expect(warnings).toHaveLength(1);
  const warning = JSON.parse(warnings[0]) as Record<string, unknown>;
  expect(warning).toMatchObject({ level: 40, workflowId: FOREIGN_ID });
  expect(warning.reason).toMatch(new RegExp(`unknown key id "${FOREIGN_KEY_ID}".*ENCRYPTION_KEYS`));
  expect(lines.join('')).not.toMatch(/request failed/);
});
