import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { Client } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType, TypedSearchAttributes } from '@temporalio/common';
import { stateFiles } from '../../lib/stateFiles';
import { VM_ID, VM_NAME, VM_NODE, VM_OPERATION, VM_OS } from '../../contract';
import { vmProcess } from '../../sandbox/state/runtime';
import { addFault } from '../../sandbox/state/faults';
import { eventually, waitFor as waitUntil } from '../../sandbox/testkit';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { cipasswordMatches, runInGuest, userKeyPair } from '../support/guest';

/**
 * Rebuild schedules end to end: the API over real Temporal Schedules on the dev server,
 * runs executed by the worker against the sandbox cluster, real SSH into the guests. The
 * tests run in order and share VM 140 and its schedule `rebuild-vm-140`.
 */

let h: Harness;
const VMID = 140;
const ID = `rebuild-vm-${VMID}`;
const SECRET = 'Sch3d-Secret';
const SCHEDULED_BY = defineSearchAttributeKey('TemporalScheduledById', SearchAttributeType.KEYWORD);
const userKey = userKeyPair('owner@laptop');

beforeAll(async () => {
  h = await startHarness();
  const res = await requestSse(`${h.api}/vm/install`, {
    body: { os: 'debian', version: '12', id: VMID, name: 'nightly', pubkey: userKey.publicKey },
  });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
});

afterAll(async () => {
  // The dev server outlives this file: leave no schedule firing at a task queue nobody polls.
  for (const id of [ID, 'fast-140', 'db-141']) await h?.service.client.schedule.getHandle(id).delete().catch(() => undefined);
  await h?.stop();
});

const call = (method: string, p: string, body?: unknown) => apiCall(h.api, method, p, body);
const post = (p: string, body?: unknown) => call('POST', p, body);
const show = async (id = ID) => (await call('GET', `/schedules/${id}`)).json.schedule;

const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 90_000) => waitUntil(what, fn, timeoutMs, 500);

/** The schedule's newest run once it has finished (rebuilt, skipped or failed). */
async function finishedRun(id: string, after: number) {
  return waitFor(`a finished run of ${id}`, async () => {
    const runs = (await show(id)).recentRuns as Array<Record<string, any>>;
    const run = runs.filter((r) => Date.parse(r.startedAt) >= after).at(-1);
    return run && run.outcome !== 'running' ? run : undefined;
  });
}

/**
 * Pauses a schedule and waits out the runs it has going: a 10 s schedule can start another
 * run between the one a test waited for and its deletion, and that run's rebuild would meet
 * the next test.
 */
async function stopSchedule(id: string) {
  expect((await post(`/schedules/${id}/pause`, { reason: 'test over' })).status).toBe(200);
  const { info } = await h.service.client.schedule.getHandle(id).describe();
  for (const action of info.runningActions) {
    await h.service.client.workflow
      .getHandle(action.workflow.workflowId)
      .result()
      .catch(() => undefined);
  }
  await vmIdle();
}

/** Waits until no workflow holds the VM (`vm-<vmid>` closed). */
async function vmIdle(vmid = VMID) {
  await h.service.client.workflow
    .getHandle(`vm-${vmid}`)
    .result()
    .catch(() => undefined);
}

const inGuest = (command: string, key: Buffer = userKey.privateKey, vmid = VMID) =>
  runInGuest(`127.0.0.${vmid}`, h.config.vmSshPort, 'debian', key, command);

async function qmCalls(since: number, sub: string, vmid = VMID) {
  return (await h.sandbox.calls()).slice(since).filter((c) => c.argv[0] === 'qm' && c.argv[1] === sub && c.argv[2] === String(vmid));
}

/** Every string and byte array inside a value, searched for `needle`. */
function contains(value: unknown, needle: string): boolean {
  if (typeof value === 'string') return value.includes(needle);
  if (value instanceof Uint8Array) return Buffer.from(value).includes(needle);
  if (value && typeof value === 'object') return Object.values(value).some((v) => contains(v, needle));
  return false;
}

describe('creating a schedule', () => {
  test.each<[string, Record<string, unknown>, RegExp]>([
    ['a minute out of range', { vmid: VMID, cron: '61 * * * *' }, /^please check your input: cron: minute field "61": values must be within 0-59$/],
    ['words', { vmid: VMID, cron: 'every day' }, /^please check your input: cron: must have 5 fields/],
    ['four fields', { vmid: VMID, cron: '0 3 * *' }, /^please check your input: cron: must have 5 fields .*got 4$/],
    ['a backwards range', { vmid: VMID, cron: '0 5-3 * * *' }, /cron: hour field "5-3": range 5-3 runs backwards/],
    ['a time zone inside the cron', { vmid: VMID, cron: 'CRON_TZ=UTC 0 3 * * *' }, /cron: put the time zone in "timezone"/],
    ['a bad interval', { vmid: VMID, interval: '1 day' }, /^please check your input: interval: must be a duration like "1d"/],
    ['a tiny interval', { vmid: VMID, interval: '5s' }, /interval: must be at least 10s/],
    ['an unknown time zone', { vmid: VMID, cron: '0 3 * * *', timezone: 'Mars/Olympus' }, /^please check your input: timezone: must be an IANA time zone name/],
    ['an offset for a time zone', { vmid: VMID, cron: '0 3 * * *', timezone: '+01:00' }, /timezone: must be an IANA time zone name/],
    ['cron and interval', { vmid: VMID, cron: '0 3 * * *', interval: '1d' }, /interval: give either cron or interval, not both/],
    ['no timing', { vmid: VMID }, /cron: give a cron expression/],
    ['no VM', { cron: '0 3 * * *' }, /vmid: give either vmid/],
    ['a string vmid', { vmid: '140', cron: '0 3 * * *' }, /vmid: must be an integer/],
    ['an overlap policy that interrupts a rebuild', { vmid: VMID, cron: '0 3 * * *', overlap: 'TERMINATE_OTHER' }, /overlap: must be one of SKIP, BUFFER_ONE, BUFFER_ALL, ALLOW_ALL/],
    ['an unknown field', { vmid: VMID, cron: '0 3 * * *', every: 'day' }, /unknown field\(s\): every/],
    ['a spec without id', { spec: { os: 'debian', version: '12' }, cron: '0 3 * * *' }, /spec\.id: is required/],
    ['a spec with a bad version', { spec: { os: 'debian', version: '99', id: 141 }, cron: '0 3 * * *' }, /spec\.version: must be one of 11, 12, 13 for debian/],
    // A rebuild re-creates the VM from its spec, which holds no user-data: refused, not dropped.
    ['a spec with userData', { spec: { os: 'debian', version: '12', id: 141, userData: '#cloud-config\nruncmd: []\n' }, cron: '0 3 * * *' }, /spec\.userData: is not kept by a schedule/],
  ])('%s is 400 naming the field', async (_name, body, message) => {
    const res = await post('/schedules', body);
    expect(res.status).toBe(400);
    expect(res.json.success).toBe(false);
    expect(res.json.message).toMatch(message);
    expect((await call('GET', `/schedules/${ID}`)).status).toBe(404);
  });

  test('a VM that is missing, foreign or disabled gets no schedule', async () => {
    expect(await post('/schedules', { vmid: 199, cron: '0 3 * * *' })).toEqual({ status: 404, json: { success: false, message: 'VM 199 does not exist' } });

    await execa('qm', ['create', '150', '--name', 'foreign'], { env: { ...process.env, ...h.sandbox.envFor('pve1') } });
    const foreign = await post('/schedules', { vmid: 150, cron: '0 3 * * *' });
    expect(foreign.status).toBe(409);
    expect(foreign.json.message).toMatch(/not installed by QemuRun/);
    expect((await call('GET', '/schedules/rebuild-vm-150')).status).toBe(404);

    const file = stateFiles(h.config.dataDir).disabled;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${VMID}:nightly\n`);
    try {
      const disabled = await post('/schedules', { vmid: VMID, cron: '0 3 * * *' });
      expect(disabled.status).toBe(400);
      expect(disabled.json.message).toMatch(/VM 140 is disabled/);
    } finally {
      fs.rmSync(file);
    }
    expect((await call('GET', `/schedules/${ID}`)).status).toBe(404);
  });

  test('201 with next runs in the given time zone; the password only in the encrypted action', async () => {
    const res = await post('/schedules', { vmid: VMID, cron: '30 3 * * *', timezone: 'Europe/Paris', note: 'nightly rebuild', passwd: SECRET });
    expect(res.status).toBe(201);
    const s = res.json.schedule;
    expect(s).toMatchObject({
      id: ID,
      vmid: VMID,
      source: 'recorded',
      cron: '30 3 * * *',
      timezone: 'Europe/Paris',
      overlap: 'SKIP',
      pauseOnFailure: true,
      paused: false,
      note: 'nightly rebuild',
      passwd: 'set',
    });
    expect(s.nextRuns.length).toBeGreaterThan(0);
    const paris = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit' });
    for (const t of s.nextRuns) expect(paris.format(new Date(t))).toBe('03:30');
    expect(contains(res.json, SECRET)).toBe(false);

    // Only the action's arguments hold it, encrypted by the payload codec.
    const desc = await h.service.client.schedule.getHandle(ID).describe();
    // The run's input names its workflow type, as the workers require.
    expect(desc.action.args).toEqual([{ vmid: VMID, passwd: SECRET, qemurunWorkflowType: 'scheduledRebuild' }]);
    const raw = desc.raw.schedule!;
    const encoding = Buffer.from(raw.action!.startWorkflow!.input!.payloads![0].metadata!.encoding!).toString();
    expect(encoding).toBe('binary/encrypted');
    expect(contains(desc.raw, SECRET)).toBe(false);
    expect(contains(desc.memo, SECRET)).toBe(false);

    const again = await post('/schedules', { vmid: VMID, interval: '1d' });
    expect(again.status).toBe(409);
    expect(again.json.message).toMatch(/already exists/);
  });

  test('the list shows it', async () => {
    const found = await waitFor('the schedule in the list', async () => {
      const list = (await call('GET', '/schedules')).json;
      return list.schedules.find((x: { id: string }) => x.id === ID);
    });
    expect(found).toMatchObject({ id: ID, vmid: VMID, cron: '30 3 * * *', timezone: 'Europe/Paris', paused: false, note: 'nightly rebuild' });
    expect(Date.parse(found.nextRun)).toBeGreaterThan(Date.now());
  });
});

describe('runs', () => {
  test('trigger rebuilds the VM: new boot, same VMID and IP, the recorded key, the schedule\'s password', async () => {
    expect(await inGuest('echo before > ~/marker')).toBe(0);
    const procBefore = vmProcess(h.sandbox.dir, VMID)!;
    const t0 = Date.now() - 1000;
    const res = await post(`/schedules/${ID}/trigger`);
    expect(res.status).toBe(202);
    const run = await finishedRun(ID, t0);
    expect(run).toMatchObject({ outcome: 'rebuilt', status: 'COMPLETED', rebuildWorkflowId: `vm-${VMID}` });
    expect(run.workflowId).toMatch(/^rebuild-vm-140-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    expect(vmProcess(h.sandbox.dir, VMID)!.startedAt).toBeGreaterThan(procBefore.startedAt);
    expect(await inGuest('test -e ~/marker')).not.toBe(0);
    expect(await inGuest('true')).toBe(0);
    const conf = (await h.sandbox.readConfig(VMID))!;
    expect(conf).toMatch(/^name: nightly-140$/m);
    expect(conf).toMatch(/^ipconfig0: ip=127\.0\.0\.140\/24,gw=127\.0\.0\.1$/m);
    expect(cipasswordMatches(conf, SECRET)).toBe(true);
  });

  test('each run carries the install search attributes, VmOperation=rebuild, and its schedule', async () => {
    const run = (await show()).recentRuns.at(-1);
    const d = await h.service.client.workflow.getHandle(run.workflowId).describe();
    expect(d.type).toBe('scheduledRebuild');
    const sa = d.typedSearchAttributes;
    expect([sa.get(VM_ID), sa.get(VM_OPERATION), sa.get(VM_OS), sa.get(VM_NAME), sa.get(VM_NODE)]).toEqual([VMID, 'rebuild', 'debian-12', 'nightly-140', 'pve1']);
    expect(sa.get(SCHEDULED_BY)).toBe(ID);
    const rebuild = await h.service.client.workflow.getHandle(`vm-${VMID}`).describe();
    expect(rebuild.type).toBe('vmRebuild');
    expect(rebuild.typedSearchAttributes.get(VM_OPERATION)).toBe('rebuild');
    expect(rebuild.typedSearchAttributes.get(VM_NAME)).toBe('nightly-140');
    // Nothing secret in what Temporal keeps in plain text.
    expect(contains(d.raw.workflowExecutionInfo?.searchAttributes, SECRET)).toBe(false);
    expect(contains(d.raw.workflowExecutionInfo?.memo, SECRET)).toBe(false);
  });

  test('triggered twice quickly, one rebuild runs (overlap SKIP)', async () => {
    const calls = (await h.sandbox.calls()).length;
    const before = await show();
    const t0 = Date.now() - 1000;
    expect((await post(`/schedules/${ID}/trigger`)).status).toBe(202);
    expect((await post(`/schedules/${ID}/trigger`)).status).toBe(202);
    await finishedRun(ID, t0);
    await vmIdle();
    const after = await show();
    const runs = after.recentRuns.filter((r: { startedAt: string }) => Date.parse(r.startedAt) >= t0);
    expect(runs).toHaveLength(1);
    expect(after.skippedOverlap).toBe(before.skippedOverlap + 1);
    expect(await qmCalls(calls, 'destroy')).toHaveLength(1);
    expect(await qmCalls(calls, 'create')).toHaveLength(1);
  });

  test('another operation on the VM makes a run skip and say so', async () => {
    const calls = (await h.sandbox.calls()).length;
    // The direct rebuild stays running (its start takes 10 s) until the scheduled run has
    // looked: on a loaded machine the schedule can take longer to start a run than a
    // sandbox rebuild takes to finish.
    addFault(h.sandbox.dir, { command: 'qm start', latencyMs: 10_000, times: 1 });
    const direct = await requestSse(`${h.api}/vm/${VMID}/rebuild`, { body: {}, stopAfter: 2 });
    expect(direct.status).toBe(200);
    const t0 = Date.now() - 1000;
    expect((await post(`/schedules/${ID}/trigger`)).status).toBe(202);
    const run = await finishedRun(ID, t0);
    expect(run).toMatchObject({ status: 'COMPLETED', outcome: 'skipped' });
    expect(run.reason).toMatch(/^VM 140 is busy: vmRebuild \(workflow vm-140, started .*\) is running$/);
    await vmIdle();
    expect(await qmCalls(calls, 'create')).toHaveLength(1);
    expect((await show()).paused).toBe(false);
  });
});

describe('pause', () => {
  test('a paused schedule refuses a trigger through the API; Temporal itself would still run it', async () => {
    const res = await post(`/schedules/${ID}/pause`, { reason: 'maintenance window' });
    expect(res.status).toBe(200);
    expect(res.json.schedule).toMatchObject({ paused: true, note: 'maintenance window' });
    const before = await show();
    const taken = before.actionsTaken;

    const refused = await post(`/schedules/${ID}/trigger`);
    expect(refused.status).toBe(409);
    expect(refused.json.message).toBe(`schedule ${ID} is paused (maintenance window); unpause it first, or rebuild now with POST /api/vm/${VMID}/rebuild`);

    // Temporal's own semantics, and the reason the API refuses: a manual trigger runs
    // even on a paused schedule. The schedule takes its triggers in order, so this one
    // doubles as the witness that the refused one never reached it: that would have
    // been one more action, or (overlap SKIP) one more skipped.
    const t0 = Date.now() - 1000;
    await h.service.client.schedule.getHandle(ID).trigger('SKIP');
    const run = await finishedRun(ID, t0);
    expect(run.outcome).toBe('rebuilt');
    const s = await show();
    expect(s.actionsTaken).toBe(taken + 1);
    expect(s.skippedOverlap).toBe(before.skippedOverlap);
    expect(s.recentRuns.filter((r: { startedAt: string }) => Date.parse(r.startedAt) >= t0)).toHaveLength(1);
    expect(s.paused).toBe(true);
  });

  test('a paused interval schedule takes no runs; unpaused, it does', async () => {
    const created = await post('/schedules', { id: 'fast-140', vmid: VMID, interval: '10s', paused: true, note: 'test: every 10s' });
    expect(created.status).toBe(201);
    expect(created.json.schedule).toMatchObject({ id: 'fast-140', interval: '10s', paused: true, note: 'test: every 10s' });
    // A paused schedule records nothing for a time it passes over (not even its next runs
    // move on), so a witness shows the time passed: an unpaused schedule of the same
    // interval, made after it, fires at the same boundaries (multiples of 10 s).
    const plain = new Client({ connection: h.service.client.connection, namespace: h.config.temporal.namespace });
    const witness = await plain.schedule.create({
      scheduleId: 'witness-140',
      spec: { intervals: [{ every: '10s' }] },
      // A workflow no worker runs: starting it is the action counted, and nothing else happens.
      action: { type: 'startWorkflow', workflowType: 'scheduleWitness', workflowId: 'witness-140', taskQueue: `witness-${Date.now()}`, args: [] },
    });
    try {
      await eventually(async () => expect((await witness.describe()).info.numActionsTaken).toBeGreaterThan(0), 30_000, 250);
    } finally {
      await witness.delete();
      for await (const run of plain.workflow.list({ query: `WorkflowType = 'scheduleWitness'` })) {
        await plain.workflow.getHandle(run.workflowId, run.runId).terminate('witness done').catch(() => undefined);
      }
    }
    expect((await show('fast-140')).actionsTaken).toBe(0);

    const t0 = Date.now() - 1000;
    const unpaused = await post('/schedules/fast-140/unpause', { reason: 'go' });
    expect(unpaused.json.schedule).toMatchObject({ paused: false, note: 'go' });
    const run = await finishedRun('fast-140', t0);
    expect(['rebuilt', 'skipped']).toContain(run.outcome);
    await stopSchedule('fast-140');
    expect((await call('DELETE', '/schedules/fast-140')).status).toBe(200);
  });

  test('unpause with a reason', async () => {
    const res = await post(`/schedules/${ID}/unpause`, { reason: 'window over' });
    expect(res.json.schedule).toMatchObject({ paused: false, note: 'window over' });
    expect((await post(`/schedules/${ID}/pause`, { reason: 'x\ny' })).status).toBe(400);
  });
});

describe('update', () => {
  test('timing, time zone, overlap and note change; the password stays', async () => {
    let res = await call('PATCH', `/schedules/${ID}`, { interval: '6h', note: 'every 6 hours' });
    expect(res.status).toBe(200);
    expect(res.json.schedule).toMatchObject({ interval: '6h', timezone: 'Europe/Paris', note: 'every 6 hours', passwd: 'set' });
    expect(res.json.schedule.cron).toBeUndefined();
    const [a, b] = res.json.schedule.nextRuns.map((t: string) => Date.parse(t));
    expect(b - a).toBe(6 * 3600_000);

    res = await call('PATCH', `/schedules/${ID}`, { timezone: 'Asia/Tokyo', overlap: 'BUFFER_ONE' });
    expect(res.json.schedule).toMatchObject({ interval: '6h', timezone: 'Asia/Tokyo', overlap: 'BUFFER_ONE' });

    // The same through POST, for clients limited to GET and POST.
    res = await post(`/schedules/${ID}/update`, { cron: '0 4 * * 1-5', overlap: 'SKIP' });
    expect(res.json.schedule).toMatchObject({ cron: '0 4 * * 1-5', timezone: 'Asia/Tokyo', overlap: 'SKIP' });
    const tokyo = new Intl.DateTimeFormat('en-GB', { timeZone: 'Asia/Tokyo', weekday: 'short', hour: '2-digit', minute: '2-digit' });
    for (const t of res.json.schedule.nextRuns) expect(tokyo.format(new Date(t))).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 04:00$/);
    expect((await h.service.client.schedule.getHandle(ID).describe()).action.args).toEqual([{ vmid: VMID, passwd: SECRET, qemurunWorkflowType: 'scheduledRebuild' }]);
  });

  test('bad values are 400 naming the field, and change nothing', async () => {
    for (const [body, message] of [
      [{ cron: '0 25 * * *' }, /cron: hour field "25"/],
      [{ timezone: 'Nowhere/Land' }, /timezone: must be an IANA/],
      [{ cron: '0 3 * * *', interval: '1d' }, /either cron or interval/],
      [{ spec: { os: 'debian', version: '12', id: VMID } }, /spec: this schedule rebuilds from the spec its VM records/],
      [{ vmid: 141 }, /unknown field\(s\): vmid/],
    ] as Array<[Record<string, unknown>, RegExp]>) {
      const res = await call('PATCH', `/schedules/${ID}`, body);
      expect(res.status).toBe(400);
      expect(res.json.message).toMatch(message);
    }
    expect(await show()).toMatchObject({ cron: '0 4 * * 1-5', timezone: 'Asia/Tokyo' });
    expect((await call('PATCH', '/schedules/nope', { note: 'x' })).status).toBe(404);
  });
});

describe('failure', () => {
  test('a run that fails pauses the schedule (pauseOnFailure) and destroys nothing', async () => {
    const file = stateFiles(h.config.dataDir).disabled;
    fs.writeFileSync(file, `${VMID}:nightly\n`);
    try {
      const proc = vmProcess(h.sandbox.dir, VMID);
      const t0 = Date.now() - 1000;
      expect((await post(`/schedules/${ID}/trigger`)).status).toBe(202);
      const run = await finishedRun(ID, t0);
      expect(run).toMatchObject({ status: 'FAILED', outcome: 'failed' });
      expect(run.error).toMatch(/VM 140 is disabled.*\(nothing was destroyed\)/);
      const s = await waitFor('the schedule to pause', async () => {
        const x = await show();
        return x.paused ? x : undefined;
      });
      expect(s.paused).toBe(true);
      expect(vmProcess(h.sandbox.dir, VMID)).toEqual(proc);
      expect(await inGuest('true')).toBe(0);
    } finally {
      fs.rmSync(file);
    }
    expect((await post(`/schedules/${ID}/unpause`, { reason: 'fixed' })).json.schedule.paused).toBe(false);
  });
});

describe('a schedule made from a full install spec', () => {
  test('installs the VM when it is missing, from that spec and its password', async () => {
    const res = await post('/schedules', {
      id: 'db-141',
      spec: { os: 'debian', version: '12', id: 141, name: 'db', ram: 1024, passwd: 'Db-pass-1' },
      interval: '1d',
    });
    expect(res.status).toBe(201);
    expect(res.json.schedule).toMatchObject({ id: 'db-141', vmid: 141, source: 'spec', passwd: 'set', interval: '1d', timezone: 'UTC' });
    expect(res.json.schedule.spec).toMatchObject({ os: 'debian', version: '12', vmid: 141, name: 'db', ramMb: 1024 });
    expect(contains(res.json, 'Db-pass-1')).toBe(false);

    const t0 = Date.now() - 1000;
    expect((await post('/schedules/db-141/trigger')).status).toBe(202);
    const run = await finishedRun('db-141', t0);
    expect(run).toMatchObject({ outcome: 'rebuilt' });
    const conf = (await h.sandbox.readConfig(141))!;
    expect(conf).toMatch(/^name: db-141$/m);
    expect(conf).toMatch(/^memory: 1024$/m);
    expect(cipasswordMatches(conf, 'Db-pass-1')).toBe(true);
    expect(await inGuest('true', h.key.privateKey, 141)).toBe(0);

    // Its spec can change (same VMID); the next run rebuilds from the new one.
    const updated = await call('PATCH', '/schedules/db-141', { spec: { os: 'debian', version: '13', id: 141, name: 'db', ram: 2048 } });
    expect(updated.status).toBe(200);
    expect(updated.json.schedule.spec).toMatchObject({ version: '13', ramMb: 2048 });
    const d = await h.service.client.schedule.getHandle('db-141').describe();
    expect((d.action.typedSearchAttributes as TypedSearchAttributes).get(VM_OS)).toBe('debian-13');
    expect((d.action.args?.[0] as { passwd?: string }).passwd).toBe('Db-pass-1');
    const moved = await call('PATCH', '/schedules/db-141', { spec: { os: 'debian', version: '13', id: 142 } });
    expect(moved.status).toBe(400);
    expect(moved.json.message).toMatch(/spec\.id: must stay 141/);
    expect((await call('DELETE', '/schedules/db-141')).status).toBe(200);
  });
});

describe('delete', () => {
  test('removes the schedule (404 afterwards); the runs it started stay in history', async () => {
    const lastRun = (await show()).recentRuns.at(-1);
    const res = await call('DELETE', `/schedules/${ID}`);
    expect(res.status).toBe(200);
    expect(res.json.message).toMatch(/deleted/);
    expect(await call('GET', `/schedules/${ID}`)).toEqual({ status: 404, json: { success: false, message: `no schedule ${ID}` } });
    expect((await post(`/schedules/${ID}/trigger`)).status).toBe(404);
    expect((await post(`/schedules/${ID}/pause`, {})).status).toBe(404);
    expect((await call('DELETE', `/schedules/${ID}`)).status).toBe(404);
    expect((await h.service.client.workflow.getHandle(lastRun.workflowId).describe()).type).toBe('scheduledRebuild');
  });

});
