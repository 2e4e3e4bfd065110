import { execa } from 'execa';
import { WorkflowFailedError } from '@temporalio/client';
import { adoptionOf, type IssuedCommand, ownerOf, VM_OPERATION } from '../../contract';
import { vmInstanceOf } from '../../lib/proxmox/vmInstance';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { vmDestroy, vmSetCpu, vmStart } from '../../workflows';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';

/**
 * The managed set (issue: operations on VMs QemuRun did not create). A VM made by hand with
 * `qm create` can be read, but every mutating operation is refused with 409 naming the
 * reason, through the API and through Temporal directly, and nothing reaches the cluster;
 * adopting it on purpose takes it in; MANAGE_ALL_VMS=true restores the seed's behaviour.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

function qm(harness: Harness, args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...harness.sandbox.envFor('pve1') } });
}

/** qm calls since `n` that change something (not config/status/list reads). */
async function mutatingSince(harness: Harness, n: number) {
  return (await harness.sandbox.calls())
    .slice(n)
    .filter((c) => !(c.argv[0] === 'qm' && ['config', 'status', 'list'].includes(c.argv[1])) && c.argv[0] !== 'pvesh' && c.argv[0] !== 'pvesm');
}

async function description(vmid: number): Promise<string | undefined> {
  const raw = await h.sandbox.readConfig(vmid);
  return raw === undefined ? undefined : parseVmConfig(raw).description;
}

/** A command's issue as the API writes it (contract IssuedCommand), for the VM at `vmid` now and `workflowId`. */
async function issuedFor(vmid: number, workflowId: string): Promise<IssuedCommand> {
  const instance = vmInstanceOf(parseVmConfig((await h.sandbox.readConfig(vmid))!));
  return { issuedAt: Date.now(), issuedFor: workflowId, ...(instance !== undefined ? { instance } : {}) };
}

async function failureOf(p: Promise<unknown>): Promise<{ type?: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  let cause = (err as WorkflowFailedError).cause as (Error & { type?: string; cause?: Error }) | undefined;
  while (cause?.cause) cause = cause.cause as Error & { type?: string; cause?: Error };
  return { type: cause?.type, message: cause?.message ?? '' };
}

describe('a VM created by hand is outside the managed set', () => {
  beforeAll(async () => {
    await qm(h, ['create', '150', '--name', 'foreign']);
  });

  test('mutating requests are 409 naming the reason, and nothing changes on the cluster', async () => {
    const before = await h.sandbox.readConfig(150);
    const n = (await h.sandbox.calls()).length;
    const since = new Date();
    const requests: Array<[string, unknown]> = [
      ['/vm/150/set/cpu', { cpu: 3 }],
      ['/vm/150/destroy', undefined],
      ['/vm/150/set/memory', { memory: 1024 }],
      ['/vm/150/set/disk', { disk: '8G' }],
      ['/vm/150/set/node', { node: 'pve2' }],
      ['/vm/150/start', undefined],
      ['/vm/150/stop', undefined],
      ['/vm/150/shutdown', undefined],
      ['/vm/150/reboot', undefined],
    ];
    for (const [p, body] of requests) {
      const res = await apiCall(h.api, 'POST', p, body);
      expect([p, res.status]).toEqual([p, 409]);
      expect(res.json).toEqual({
        success: false,
        type: 'NotManagedError',
        message:
          'VM 150 (foreign) is not managed by QemuRun: its description has no qemurun-owner marker. ' +
          'Adopt it first (POST /api/vm/150/adopt), or set MANAGE_ALL_VMS=true to act on every VM',
      });
    }
    expect(await mutatingSince(h, n)).toEqual([]);
    expect(await h.sandbox.readConfig(150)).toBe(before);
    // No workflow was started for it. The test run shares one namespace, so a vm-150 that
    // another test file started earlier may exist; none may have started since.
    const latest = await h.service.client.workflow.getHandle('vm-150').describe().catch(() => undefined);
    expect(latest === undefined || latest.startTime < since).toBe(true);
  });

  test('reads stay open', async () => {
    expect(await apiCall(h.api, 'GET', '/vm/150/status')).toEqual({ status: 200, json: 'stopped' });
    const list = await apiCall(h.api, 'GET', '/vm/list');
    expect(list.json.list.map((v: { vmid: number }) => v.vmid)).toContain(150);
  });

  test('workflows started on Temporal directly refuse it too: the activities check the marker', async () => {
    const n = (await h.sandbox.calls()).length;
    const start = <W extends typeof vmSetCpu | typeof vmDestroy | typeof vmStart>(workflow: W, args: Parameters<W>) =>
      h.service.client.workflow.start(workflow as typeof vmSetCpu, {
        taskQueue: h.config.temporal.taskQueue,
        workflowId: 'vm-150-direct',
        args: args as Parameters<typeof vmSetCpu>,
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      });
    // Issued as the API would issue them, for this very VM: only the managed set stands in the way.
    const issue = await issuedFor(150, 'vm-150-direct');
    for (const [workflow, args] of [
      [vmSetCpu, [{ vmid: 150, cores: 7, ...issue }]],
      [vmDestroy, [{ vmid: 150, ...issue }]],
      [vmStart, [{ vmid: 150, ip: '127.0.0.150', user: 'debian', ...issue }]],
    ] as const) {
      const handle = await start(workflow, args as never);
      const failure = await failureOf(handle.result());
      expect(failure.type).toBe('NotManagedError');
      expect(failure.message).toMatch(/^VM 150 \(foreign\) is not managed by QemuRun/);
    }
    expect(await mutatingSince(h, n)).toEqual([]);
    expect(parseVmConfig((await h.sandbox.readConfig(150))!).entries.cores).toBeUndefined();
  });
});

describe('adoption', () => {
  beforeAll(async () => {
    await qm(h, ['create', '151', '--name', 'kept', '--description', 'database of team A']);
  });

  test('takes any options as a 400, a missing VM as 404, and changes nothing', async () => {
    const n = (await h.sandbox.calls()).length;
    expect(await apiCall(h.api, 'POST', '/vm/151/adopt', { force: true })).toEqual({
      status: 400,
      json: { success: false, message: 'please check your input: unknown field(s): force' },
    });
    expect(await apiCall(h.api, 'POST', '/vm/199/adopt')).toEqual({ status: 404, json: { success: false, message: 'VM 199 does not exist' } });
    expect(await mutatingSince(h, n)).toEqual([]);
  });

  test('writes the owner marker and a dated note into the description, and runs as a workflow in history', async () => {
    const n = (await h.sandbox.calls()).length;
    const res = await apiCall(h.api, 'POST', '/vm/151/adopt');
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ success: true, vmid: 151, workflowId: 'vm-151', message: 'VM 151 is now managed by QemuRun' });
    const text = (await description(151))!;
    // what the operator wrote stays first
    expect(text.split('\n')[0]).toBe('database of team A');
    const owner = ownerOf(text)!;
    expect(owner).toMatch(/^adopted-vm-151-/);
    expect(res.json.owner).toBe(owner);
    expect(adoptionOf(text)).toMatch(/^\d{4}-\d\d-\d\dT\S+ workflow=vm-151 run=\S+ by=127\.0\.0\.1$/);
    // Sealed, like an install's markers: the reconciler tells it from a line typed into the Notes.
    expect(markerSealFor(h.config).check(parseVmConfig((await h.sandbox.readConfig(151))!), 151)).toMatchObject({ sealed: true, fields: { owner } });
    // the only change: the description
    const changes = await mutatingSince(h, n);
    expect(changes.map((c) => c.argv.slice(0, 4))).toEqual([['qm', 'set', '151', '--description']]);
    const d = await h.service.client.workflow.getHandle('vm-151').describe();
    expect(d.type).toBe('vmAdopt');
    expect(d.status.name).toBe('COMPLETED');
    expect(d.typedSearchAttributes.get(VM_OPERATION)).toBe('adopt');
    expect(owner).toBe(`adopted-vm-151-${d.runId}`);
  });

  test('adopting a managed VM again is 409 and changes nothing', async () => {
    const before = await h.sandbox.readConfig(151);
    const res = await apiCall(h.api, 'POST', '/vm/151/adopt');
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({ success: false, type: 'AlreadyManagedError' });
    expect(res.json.message).toMatch(/^VM 151 is already managed by QemuRun \(qemurun-owner=adopted-vm-151-/);
    expect(await h.sandbox.readConfig(151)).toBe(before);
  });

  test('a template, a protected VM and a VMID outside ADOPT_VMID_RANGE are refused, and nothing changes', async () => {
    await qm(h, ['create', '153', '--name', 'golden', '--template', '1']);
    await qm(h, ['create', '154', '--name', 'precious', '--protection', '1']);
    await qm(h, ['create', '300', '--name', 'elsewhere']);
    const before = await Promise.all([153, 154, 300].map((v) => h.sandbox.readConfig(v)));
    const n = (await h.sandbox.calls()).length;
    expect(await apiCall(h.api, 'POST', '/vm/153/adopt')).toEqual({
      status: 409,
      json: { success: false, message: 'VM 153 is a template: its clones depend on it, so it cannot be adopted' },
    });
    expect(await apiCall(h.api, 'POST', '/vm/154/adopt')).toEqual({
      status: 409,
      json: { success: false, message: 'VM 154 is protected (protection: 1): turn protection off in Proxmox first if QemuRun should manage it' },
    });
    expect(await apiCall(h.api, 'POST', '/vm/300/adopt')).toEqual({
      status: 400,
      json: { success: false, message: 'VM 300 is outside ADOPT_VMID_RANGE (100-254) and cannot be adopted' },
    });
    expect(await mutatingSince(h, n)).toEqual([]);
    expect(await Promise.all([153, 154, 300].map((v) => h.sandbox.readConfig(v)))).toEqual(before);
    for (const vmid of [153, 154, 300]) expect(ownerOf(await description(vmid))).toBeUndefined();
  });

  test('an adopted VM is operated on like an installed one', async () => {
    expect(await apiCall(h.api, 'POST', '/vm/151/set/cpu', { cpu: 3 })).toEqual({ status: 200, json: 'ok' });
    expect(await h.sandbox.readConfig(151)).toMatch(/^cores: 3$/m);
    expect(await apiCall(h.api, 'POST', '/vm/151/destroy')).toEqual({ status: 200, json: 'ok' });
    expect(await h.sandbox.readConfig(151)).toBeUndefined();
  });
});

describe('an owner line written into a foreign VM\'s Notes (qm set --description) does not make it managed', () => {
  // What a Proxmox user with VM.Config.Options can write: an owner, a run, even a seal line.
  const forged = 'team B database\nqemurun-owner=installVm-155\nqemurun-run=0192f0c4-aaaa-7000-8000-000000000000\nqemurun-seal=default:' + 'A'.repeat(43);

  beforeAll(async () => {
    await qm(h, ['create', '155', '--name', 'teamb']);
    await qm(h, ['set', '155', '--description', forged]);
  });

  test('lifecycle operations are 409 NotManagedError, through the API and Temporal, and nothing changes', async () => {
    const before = await h.sandbox.readConfig(155);
    const n = (await h.sandbox.calls()).length;
    for (const [p, body] of [
      ['/vm/155/start', undefined],
      ['/vm/155/set/cpu', { cpu: 3 }],
      ['/vm/155/destroy', undefined],
    ] as const) {
      const res = await apiCall(h.api, 'POST', p, body);
      expect([p, res.status, res.json.type]).toEqual([p, 409, 'NotManagedError']);
      expect(res.json.message).toMatch(/^VM 155 \(teamb\) is not managed by QemuRun: its qemurun-owner marker is not trusted: /);
    }
    const handle = await h.service.client.workflow.start(vmDestroy, {
      taskQueue: h.config.temporal.taskQueue,
      workflowId: 'vm-155-direct',
      args: [{ vmid: 155, ...(await issuedFor(155, 'vm-155-direct')) }],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    const failure = await failureOf(handle.result());
    expect(failure.type).toBe('NotManagedError');
    expect(failure.message).toMatch(/^VM 155 \(teamb\) is not managed by QemuRun: its qemurun-owner marker is not trusted/);
    expect(await mutatingSince(h, n)).toEqual([]);
    expect(await h.sandbox.readConfig(155)).toBe(before);
  });

  test('an admin adopts it: the forged lines give way to sealed markers, and operations run', async () => {
    const res = await apiCall(h.api, 'POST', '/vm/155/adopt');
    expect(res.status).toBe(200);
    const text = (await description(155))!;
    expect(text.split('\n')[0]).toBe('team B database');
    expect(text).not.toMatch(/installVm-155|A{43}/);
    expect(markerSealFor(h.config).check(parseVmConfig((await h.sandbox.readConfig(155))!), 155)).toMatchObject({ sealed: true, fields: { owner: res.json.owner } });
    expect(await apiCall(h.api, 'POST', '/vm/155/set/cpu', { cpu: 3 })).toEqual({ status: 200, json: 'ok' });
    expect(await h.sandbox.readConfig(155)).toMatch(/^cores: 3$/m);
  });
});

describe('MANAGE_ALL_VMS=true: every VM, as the seed did', () => {
  let open: Harness;
  beforeAll(async () => {
    open = await startHarness({ MANAGE_ALL_VMS: 'true' });
    await qm(open, ['create', '150', '--name', 'foreign']);
  });
  afterAll(async () => {
    await open?.stop();
  });

  test('set/cpu on a VM created by hand runs qm set', async () => {
    const n = (await open.sandbox.calls()).length;
    expect(await apiCall(open.api, 'POST', '/vm/150/set/cpu', { cpu: 3 })).toEqual({ status: 200, json: 'ok' });
    expect((await mutatingSince(open, n)).map((c) => c.argv)).toEqual([['qm', 'set', '150', '--cores', '3']]);
  });
});
