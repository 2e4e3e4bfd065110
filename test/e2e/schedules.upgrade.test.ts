import { Client } from '@temporalio/client';
import { startService } from '../../app/service';
import { bindRebuildScheduleTypes } from '../../app/rebuildSchedules';
import { rebuildScheduleId, WORKFLOW_TYPE_FIELD, type ScheduledRebuildResult } from '../../contract';
import type { Logger } from '../../lib/observability/log';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { waitFor } from '../../sandbox/testkit';

/**
 * Rebuild schedules saved before inputs named their workflow type (real Temporal dev server,
 * sandbox cluster): the service's start saves its own again with the type, so their runs
 * pass the workers' check; a schedule under the same id prefix that starts another workflow,
 * or whose input the service did not write for it, is left exactly as it was.
 */

let h: Harness;
const VMID = 173;
const OLD = rebuildScheduleId(VMID);
const FOREIGN = rebuildScheduleId(174);
const UNBOUND = rebuildScheduleId(175);
// Never fires by itself: the test triggers the runs it wants.
const spec = { calendars: [{ year: 2099, month: 'JANUARY' as const, dayOfMonth: 1 }] };

beforeAll(async () => {
  h = await startHarness();
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, name: 'old' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
});

afterAll(async () => {
  for (const id of [OLD, FOREIGN, UNBOUND]) await h?.service.client.schedule.getHandle(id).delete().catch(() => undefined);
  await h?.stop();
});

/** What an older version saved: its input through the codec, bound to the schedule's id, but without its type. */
function createOld(client: Client, scheduleId: string, workflowType: string, input: unknown) {
  return client.schedule.create({
    scheduleId,
    spec,
    action: { type: 'startWorkflow', workflowType, args: [input], taskQueue: h.config.temporal.taskQueue, workflowId: scheduleId },
    memo: { qemurun: 'rebuild', vmid: VMID, source: 'recorded' },
  });
}

/** The stored input as Temporal holds it, read without decoding. */
const rawInput = async (id: string) =>
  (await h.service.client.workflowService.describeSchedule({ namespace: h.config.temporal.namespace, scheduleId: id })).schedule?.action?.startWorkflow?.input;

function recordingLogger(lines: string[]): Logger {
  const log = (m: unknown, msg?: unknown) => void lines.push(String(typeof m === 'string' ? m : msg));
  return { warn: log, info: log, error: log, debug: log, trace: log, fatal: log, child: () => recordingLogger(lines) } as unknown as Logger;
}

test('a start saves the old rebuild schedules it wrote with their type, and leaves the others', async () => {
  const { client } = h.service;
  // The service's client binds workflow starts, not schedules: this is the old way.
  await createOld(client, OLD, 'scheduledRebuild', { vmid: VMID });
  await createOld(client, FOREIGN, 'vmStop', { vmid: 174 });
  // Written without the codec (plain JSON): the service's codec refuses to decode it.
  const plain = new Client({ connection: client.connection, namespace: h.config.temporal.namespace });
  await createOld(plain, UNBOUND, 'scheduledRebuild', { vmid: 175 });
  const foreignBefore = await rawInput(FOREIGN);
  const unboundBefore = await rawInput(UNBOUND);
  expect((await client.schedule.getHandle(OLD).describe()).action).toMatchObject({ args: [{ vmid: VMID }] });

  const lines: string[] = [];
  const again = await startService({
    config: h.config,
    temporalAddress: process.env.TEST_TEMPORAL_ADDRESS!,
    mainNodeEnv: h.sandbox.envFor(h.config.mainNode),
    worker: false,
    host: '127.0.0.1',
    logger: recordingLogger(lines),
  });
  await again.stop();

  const now = await client.schedule.getHandle(OLD).describe();
  expect(now.action).toMatchObject({ workflowType: 'scheduledRebuild', args: [{ vmid: VMID, [WORKFLOW_TYPE_FIELD]: 'scheduledRebuild' }] });
  expect(now.memo).toEqual({ qemurun: 'rebuild', vmid: VMID, source: 'recorded' });
  expect(await rawInput(FOREIGN)).toEqual(foreignBefore);
  expect(await rawInput(UNBOUND)).toEqual(unboundBefore);
  expect(lines).toEqual(
    expect.arrayContaining([
      `schedule ${FOREIGN} does not start scheduledRebuild (vmStop): left as it is`,
      expect.stringMatching(new RegExp(`^rebuild schedule ${UNBOUND}: its input cannot be read \\(refusing a payload that is not encrypted.*: left as it is$`)),
      `rebuild schedule ${OLD}: saved again with its workflow type in its input`,
    ]),
  );

  // Idempotent: nothing more to save.
  expect(await bindRebuildScheduleTypes(client, h.config, recordingLogger([]))).toEqual({ saved: [], left: [FOREIGN, UNBOUND] });

  // Its run passes the workers' type check and rebuilds the VM.
  const handle = client.schedule.getHandle(OLD);
  await handle.trigger();
  const workflowId = await waitFor('the triggered run', async () => (await handle.describe()).info.recentActions.at(-1)?.action.workflow.workflowId, 60_000);
  expect(workflowId).toMatch(new RegExp(`^${OLD}-`));
  const result = (await client.workflow.getHandle(workflowId!).result()) as ScheduledRebuildResult;
  expect(result).toMatchObject({ outcome: 'rebuilt', vmid: VMID });
}, 300_000);

test('the schedule list shows ours although a schedule in the namespace has a memo the service cannot decode', async () => {
  // UNBOUND's memo was written without the codec, as `temporal schedule create --memo` writes
  // one; the SDK's listing decodes every memo and ends at it (it was a 500 for the whole list).
  const sdkListing = async () => {
    for await (const s of h.service.client.schedule.list()) void s;
  };
  await expect(sdkListing()).rejects.toThrow(/refusing a payload that is not encrypted/);
  const res = await apiCall(h.api, 'GET', '/schedules');
  expect(res.status).toBe(200);
  const listed = (res.json as { schedules: Array<{ id: string; vmid: number | null }> }).schedules;
  expect(listed.map((s) => s.id)).toEqual(expect.arrayContaining([OLD, UNBOUND]));
  expect(listed.map((s) => s.id)).not.toContain(FOREIGN);
  expect(listed.find((s) => s.id === OLD)).toMatchObject({ vmid: VMID, paused: false, timezone: 'UTC' });
  expect(listed.find((s) => s.id === UNBOUND)).toMatchObject({ vmid: null });
});
