import crypto from 'node:crypto';
import { execa } from 'execa';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { findTemporalCli } from '../../lib/temporal/devServer';
import { ensureReconcileSchedule } from '../../app/reconcileSchedule';
import { reconcileScheduleId, type ReconcileItem } from '../../contract';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';

/**
 * The reconciler end to end (real service, Temporal dev server, sandbox, SSH): an install
 * terminated with the Temporal CLI after `qm create` leaves its half-built VM behind (terminate
 * runs no compensation); the dry run names it and changes nothing; a run removes it, and the
 * VM of an install that completed, a VM made by hand and an adopted VM stay as they are. Nor
 * do VMs condemned by someone who reaches Temporal or edits a VM's Notes: a new run under a
 * completed install's id, markers written or copied by hand.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ RECONCILE_INTERVAL: '1h' });
});

afterAll(async () => {
  await h?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function qm(args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } });
}

async function startInstall(name: string): Promise<{ workflowId: string; location: string }> {
  const res = await fetch(`${h.api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
    body: JSON.stringify({ os: 'debian', version: '12', name }),
  });
  expect(res.status).toBe(202);
  const json = (await res.json()) as { workflowId: string; status: string };
  return { workflowId: json.workflowId, location: json.status };
}

/** Polls an install's status resource until `done` holds for it (bounded). */
async function pollStatus(location: string, done: (s: any) => boolean): Promise<any> {
  for (let i = 0; i < 1200; i++) {
    const s = (await (await fetch(new URL(location, h.service.url))).json()) as any;
    if (done(s)) return s;
    if (s.status !== 'RUNNING') throw new Error(`${location} closed as ${s.status} (${JSON.stringify(s)})`);
    await sleep(100);
  }
  throw new Error(`${location}: polling budget spent`);
}

async function exists(vmid: number): Promise<boolean> {
  return (await h.sandbox.readConfig(vmid)) !== undefined;
}

function byVmid(vms: ReconcileItem[]): Record<number, ReconcileItem> {
  return Object.fromEntries(vms.map((v) => [v.vmid, v]));
}

test('the service keeps the reconcile schedule in line with RECONCILE_INTERVAL', async () => {
  const { client } = h.service;
  const handle = client.schedule.getHandle(reconcileScheduleId(h.config.temporal.taskQueue));
  const made = await handle.describe();
  expect(made.spec.intervals).toMatchObject([{ every: 3_600_000 }]);
  expect(made.action).toMatchObject({ type: 'startWorkflow', workflowType: 'reconcileVms', taskQueue: h.config.temporal.taskQueue });
  expect(made.policies.overlap).toBe('SKIP');

  // Another start with the same settings changes nothing; other settings are applied.
  expect(await ensureReconcileSchedule(client, h.config)).toBe('unchanged');
  expect(await ensureReconcileSchedule(client, { ...h.config, reconcileIntervalMs: 30 * 60_000 })).toBe('updated');
  expect((await handle.describe()).spec.intervals).toMatchObject([{ every: 1_800_000 }]);
  expect(await ensureReconcileSchedule(client, { ...h.config, reconcileIntervalMs: undefined })).toBe('deleted');
  expect(await ensureReconcileSchedule(client, { ...h.config, reconcileIntervalMs: undefined })).toBe('off');
});

test('a terminated install: its half-built VM is removed; completed, foreign and adopted VMs are untouched; the dry run changes nothing', async () => {
  const cli = findTemporalCli()!.path;
  const temporal = ['--address', process.env.TEST_TEMPORAL_ADDRESS!, '--namespace', h.config.temporal.namespace];

  // An install that completed.
  const done = await startInstall('done');
  const doneVm = (await pollStatus(done.location, (s) => s.status === 'COMPLETED')).vmid as number;
  // Then, with Temporal access and nothing else, a new run under its id that fails at once.
  await execa(cli, ['workflow', 'start', ...temporal, '--type', 'installVm', '--task-queue', h.config.temporal.taskQueue, '--workflow-id', done.workflowId, '--input', '{}', '--execution-timeout', '5s']);
  await h.service.client.workflow.getHandle(done.workflowId).result().catch(() => undefined);
  expect((await h.service.client.workflow.getHandle(done.workflowId).describe()).status.name).toMatch(/FAILED|TIMED_OUT/);

  // A VM made by hand (no marker), one adopted into the managed set, and one whose owner
  // the namespace has never heard of (its markers sealed, as only QemuRun can).
  await qm(['create', '150', '--name', 'foreign']);
  await qm(['create', '152', '--name', 'adopted']);
  expect((await apiCall(h.api, 'POST', '/vm/152/adopt')).status).toBe(200);
  const lost = { vmid: 151, instance: crypto.randomUUID(), owner: `install-${crypto.randomUUID()}`, run: crypto.randomUUID() };
  const lostMarkers = `qemurun-owner=${lost.owner}\nqemurun-run=${lost.run}\nqemurun-instance=${lost.instance}\nqemurun-seal=${markerSealFor(h.config).seal(lost)}`;
  await qm(['create', '151', '--name', 'lost', '--description', lostMarkers, '--smbios1', `uuid=${lost.instance}`]);

  // An install stopped for good after qm create: its first `qm start` hangs, and the
  // workflow is terminated meanwhile, which runs no compensation.
  await h.sandbox.injectFault({ command: 'qm start', hangMs: 8000, times: 1 });
  const half = await startInstall('half');
  const halfVm = (await pollStatus(half.location, (s) => s.step === 'VM initialization > start' && s.vmid !== undefined)).vmid as number;
  await execa(cli, ['workflow', 'terminate', ...temporal, '--workflow-id', half.workflowId, '--reason', 'operator gave up']);
  expect((await h.service.client.workflow.getHandle(half.workflowId).describe()).status.name).toBe('TERMINATED');
  expect(await exists(halfVm)).toBe(true);

  // Markers a Proxmox user wrote with the Notes (VM.Config.Options): one naming that
  // terminated install, and the half-built VM's own sealed markers copied onto another VM.
  await qm(['create', '154', '--name', 'forged', '--description', `qemurun-owner=${half.workflowId}`]);
  await qm(['create', '155', '--name', 'copied']);
  await qm(['set', '155', '--description', parseVmConfig((await h.sandbox.readConfig(halfVm))!).description!]);

  // The dry run: the verdicts, and nothing changed.
  const dry = await apiCall(h.api, 'GET', '/reconcile');
  expect(dry.status).toBe(200);
  expect(dry.json).toMatchObject({ success: true, dryRun: true, removed: [], failed: [] });
  expect(dry.json.workflowId).toMatch(/^reconcile-dry-run-/);
  const planned = byVmid(dry.json.vms);
  expect(planned[halfVm]).toMatchObject({ action: 'remove', owner: half.workflowId, ownerState: 'TERMINATED' });
  expect(planned[151]).toMatchObject({ action: 'remove', owner: lost.owner, ownerState: 'UNKNOWN_TO_NAMESPACE' });
  expect(planned[doneVm]).toMatchObject({ action: 'keep', owner: done.workflowId, ownerState: 'COMPLETED' });
  expect(planned[150]).toMatchObject({ action: 'keep', reason: 'no qemurun-owner marker: not a VM QemuRun manages' });
  expect(planned[152]).toMatchObject({ action: 'keep', ownerState: 'ADOPTED' });
  expect(planned[154]).toMatchObject({ action: 'keep', owner: half.workflowId, reason: expect.stringMatching(/not trusted: .*no owner run/) });
  expect(planned[155]).toMatchObject({ action: 'keep', owner: half.workflowId, reason: expect.stringMatching(/not trusted: .*copied from another VM than 155/) });
  for (const vmid of [halfVm, 151, doneVm, 150, 152, 154, 155]) expect(await exists(vmid)).toBe(true);

  // The run: the two abandoned VMs are gone, nothing else is touched.
  const foreignBefore = await h.sandbox.readConfig(150);
  const doneBefore = await h.sandbox.readConfig(doneVm);
  const run = await apiCall(h.api, 'POST', '/reconcile');
  expect(run.status).toBe(200);
  expect(run.json).toMatchObject({ success: true, dryRun: false, failed: [] });
  expect(run.json.removed).toEqual([halfVm, 151].sort((a, b) => a - b));
  expect(byVmid(run.json.vms)[halfVm]).toMatchObject({ action: 'removed', reason: `its owner ${half.workflowId} closed as terminated` });
  expect(await exists(halfVm)).toBe(false);
  expect(await exists(151)).toBe(false);
  expect(await h.sandbox.readConfig(150)).toBe(foreignBefore);
  expect(await h.sandbox.readConfig(doneVm)).toBe(doneBefore);
  for (const vmid of [152, 154, 155]) expect(await exists(vmid)).toBe(true);
  const destroyed = (await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm' && c.argv[1] === 'destroy').map((c) => Number(c.argv[2]));
  expect(destroyed.sort((a, b) => a - b)).toEqual([halfVm, 151].sort((a, b) => a - b));

  // A second run finds nothing left to do.
  const again = await apiCall(h.api, 'POST', '/reconcile');
  expect(again.json).toMatchObject({ removed: [], failed: [] });
});

test('30 GETs at once (an <img src> on a busy page) start one dry run, and all get its answer', async () => {
  const since = new Date();
  const answers = await Promise.all(Array.from({ length: 30 }, () => apiCall(h.api, 'GET', '/reconcile')));
  expect(answers.map((a) => a.status)).toEqual(Array(30).fill(200));
  const ids = new Set(answers.map((a) => a.json.workflowId as string));
  expect(ids.size).toBe(1);
  const [id] = ids;
  expect(answers.every((a) => a.json.dryRun === true && Array.isArray(a.json.vms))).toBe(true);
  // Another GET soon after is answered from the same run.
  expect((await apiCall(h.api, 'GET', '/reconcile')).json.workflowId).toBe(id);
  const { count } = await h.service.client.workflow.count(
    `TaskQueue = '${h.config.temporal.taskQueue}' AND WorkflowType = 'reconcileVms' AND StartTime >= '${since.toISOString()}'`,
  );
  expect(count).toBe(1);
});

test('a survey that cannot read the cluster is 502 naming the cluster\'s own error, and removes nothing', async () => {
  const destroyedBefore = (await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm' && c.argv[1] === 'destroy').length;
  // The listing refused for a missing privilege: no retry can grant it, so the survey fails at once.
  await h.sandbox.injectFault({ command: 'pvesh get /cluster/resources', stderr: 'Permission check failed (/, Sys.Audit)', exitCode: 255, times: 1 });
  try {
    const run = await apiCall(h.api, 'POST', '/reconcile');
    expect(run.status).toBe(502);
    // The activity's failure, not the wrappers Temporal puts around it ("Activity task failed").
    expect(run.json).toMatchObject({ success: false, message: expect.stringMatching(/^reconcile failed: .*Permission check failed \(\/, Sys\.Audit\)/), workflowId: expect.stringMatching(/^reconcile-/) });
  } finally {
    await h.sandbox.clearFaults();
  }
  expect((await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm' && c.argv[1] === 'destroy')).toHaveLength(destroyedBefore);
});
