import { VM_ID, VM_OPERATION } from '../../contract/searchAttributes';
import { startHarness, Harness } from '../support/harness';
import { startRealTemporal, RealTemporal } from '../support/realTemporal';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { sshWorks } from '../support/guest';
import { waitFor as waitUntil } from '../../sandbox/testkit';

/**
 * The service on the Temporal server itself, as deployments run it (docker-compose.yml):
 * persistence and visibility on PostgreSQL, deploy/temporal/qemurun.yaml, the server's
 * own Schedules. An install, an operation on the VM, a scheduled rebuild and a server
 * restart, end to end against the sandbox cluster. The tests run in order and share VM 160.
 */

let temporal: RealTemporal;
let h: Harness;
const VMID = 160;
const SCHEDULE = `rebuild-vm-${VMID}`;

beforeAll(async () => {
  const t0 = Date.now();
  temporal = await startRealTemporal();
  console.log(`temporal-server on PostgreSQL ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  h = await startHarness({}, { temporalAddress: temporal.address });
}, 180_000);

afterAll(async () => {
  await h?.service.client.schedule.getHandle(SCHEDULE).delete().catch(() => undefined);
  await h?.stop();
  await temporal?.stop();
});

const call = (method: string, p: string, body?: unknown) => apiCall(h.api, method, p, body);
const canSsh = () => sshWorks(`127.0.0.${VMID}`, h.config.vmSshPort, 'debian', h.key.privateKey);

const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 90_000) => waitUntil(what, fn, timeoutMs, 500);

test('an install runs to an SSH-ready VM, findable by its search attributes in SQL visibility', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, name: 'prod' } });
  expect(res.status).toBe(200);
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.closed).toBe(true);
  expect(res.events.map((e) => e.message)).toContain(`[*] VMID: ${VMID}`);
  expect(await canSsh()).toBe(true);

  const found = await waitFor('the install in visibility', async () => {
    const runs = [];
    for await (const w of h.service.client.workflow.list({ query: `VmId = ${VMID} AND VmOperation = 'install'` })) runs.push(w);
    return runs.length > 0 ? runs : undefined;
  });
  expect(found).toHaveLength(1);
  expect(found[0].status.name).toBe('COMPLETED');
  expect(found[0].typedSearchAttributes.get(VM_ID)).toBe(VMID);
});

test('an operation on the VM: shutdown, then start', async () => {
  const stop = await call('POST', `/vm/${VMID}/shutdown`);
  expect(stop.status).toBe(200);
  expect((await call('GET', `/vm/${VMID}/status`)).json).toBe('stopped');
  const start = await requestSse(`${h.api}/vm/${VMID}/start`, { body: {} });
  expect(start.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(start.closed).toBe(true);
  expect((await call('GET', `/vm/${VMID}/status`)).json).toBe('running');
  expect(await canSsh()).toBe(true);
});

test('a schedule fires on the server by itself and rebuilds the VM', async () => {
  const created = await call('POST', '/schedules', { vmid: VMID, interval: '10s' });
  expect(created.status).toBe(201);
  // No trigger: the server's own scheduler starts the run.
  const runs = async () => (await call('GET', `/schedules/${SCHEDULE}`)).json.schedule.recentRuns as Array<Record<string, string>>;
  await waitFor('the first scheduled run', async () => (await runs()).length > 0, 60_000);
  // Paused as soon as it has fired: on a busy machine the rebuild can outlast the 10 s
  // interval, and a second fire would rebuild the VM again under the next test.
  expect((await call('POST', `/schedules/${SCHEDULE}/pause`, { reason: 'test over' })).status).toBe(200);
  const run = await waitFor('the scheduled run to finish', async () => (await runs()).find((r) => r.outcome !== 'running'), 120_000);
  expect(run).toMatchObject({ outcome: 'rebuilt', status: 'COMPLETED', rebuildWorkflowId: `vm-${VMID}` });
  expect(await runs()).toHaveLength(1);
  const rebuild = await h.service.client.workflow.getHandle(`vm-${VMID}`).describe();
  expect(rebuild.typedSearchAttributes.get(VM_OPERATION)).toBe('rebuild');
  expect(await canSsh()).toBe(true);
});

test('after a server restart the history is still there and the service carries on', async () => {
  await temporal.restart();
  const described = await waitFor('the service back on the restarted server', () =>
    h.service.client.schedule.getHandle(SCHEDULE).describe().catch(() => undefined),
  );
  expect(described.state.paused).toBe(true);
  const reboot = await requestSse(`${h.api}/vm/${VMID}/reboot`, { body: {} });
  expect(reboot.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(reboot.closed).toBe(true);
});
