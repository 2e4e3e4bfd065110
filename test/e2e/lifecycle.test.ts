import fs from 'node:fs';
import path from 'node:path';
import { sshWorks } from '../support/guest';
import { VM_ID, VM_OPERATION } from '../../contract';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';
import { eventually, waitFor } from '../../sandbox/testkit';
import { injectFaultOn, operationsMark, operationsOn, type OperationsMark } from '../support/proxmoxCalls';
import { onceInCliMode } from '../support/proxmoxMode';

/**
 * Operations on existing VMs end to end: real Temporal, the sandbox cluster (in CLI mode
 * pve1 local and pve2 over real sshd, with TEST_PROXMOX_MODE=api its REST API), real SSH
 * into the guests. VMs are installed through the API so they carry the product's marker.
 * The tests run in order and share the VMs.
 */

let h: Harness;
let vmid: number;

beforeAll(async () => {
  // REQUEST_TIMEOUT_MS below the 4 s shutdown of the 409 test: a plain operation's answer
  // waits for its workflow, past the deadline for ordinary requests.
  h = await startHarness({ VM_BALLOON_MIN: '1024', VM_MAX_DISK: '40', REQUEST_TIMEOUT_MS: '2000' });
  vmid = await install({ name: 'life', ram: 1024 });
});

afterAll(async () => {
  await h?.stop();
});

async function install(body: Record<string, unknown>): Promise<number> {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ...body } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  return Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);
}

async function post(p: string, body?: unknown): Promise<{ status: number; text: string; json: () => any; headers: Headers }> {
  const res = await fetch(`${h.api}${p}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text), headers: res.headers };
}

async function status(id: number | string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${h.api}/vm/${id}/status`);
  return { status: res.status, text: await res.text() };
}

function canSsh(id: number): Promise<boolean> {
  return sshWorks(`127.0.0.${id}`, h.config.vmSshPort, 'debian', h.key.privateKey);
}

/** The operations `op` on VM `id` the cluster carried out (since `mark`), in CLI and API mode alike. */
async function seen(op: string, id: number, mark?: OperationsMark) {
  return (await operationsOn(h, op, id, mark)).map(({ node, params, ok }) => ({ node, params, ok }));
}

/** A stream that ran to its end: no error, closed, ids 1..n, the workflow id first. */
function expectCompleted(res: SseResponse, stage: string) {
  expect(res.status).toBe(200);
  expect(res.headers['x-workflow-id']).toBe(`vm-${vmid}`);
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.closed).toBe(true);
  expect(res.events[0].message).toBe(`[*] workflow id: vm-${vmid}`);
  expect(res.events.map((e) => e.id)).toEqual(res.events.map((_, i) => i + 1));
  const last = res.events.at(-1)!;
  expect(last.step).toBe(`${stage} > finalizing`);
  expect(last.status).toBe('info');
  expect(last.message).toMatch(/^\[\+\] /);
}

describe('preconditions', () => {
  test('status answers running / stopped as text; bad and unknown VMIDs are refused', async () => {
    expect(await status(vmid)).toEqual({ status: 200, text: 'running' });
    expect((await status('abc')).status).toBe(400);
    const unknown = await status(9999);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toEqual({ success: false, message: 'VM 9999 does not exist' });
  });

  onceInCliMode.each(['abc', '0', '-3', '1.5'])('VMID %s is not a positive integer: 400', async (id) => {
    const res = await post(`/vm/${id}/stop`);
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'please check your input: id: must be a positive integer VMID' });
  });

  onceInCliMode('an unknown VMID is 404 and starts no workflow', async () => {
    const res = await post('/vm/9999/shutdown');
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ success: false, message: 'VM 9999 does not exist' });
    await expect(h.service.client.workflow.getHandle('vm-9999').describe()).rejects.toThrow();
  });

  onceInCliMode('the wrong power state is 400 with the seed\'s message', async () => {
    for (const op of ['start', 'destroy', 'set/node']) {
      const res = await post(`/vm/${vmid}/${op}`, op === 'set/node' ? { node: 'pve2' } : undefined);
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({ success: false, message: 'VM is running' });
    }
    const res = await post(`/vm/${vmid}/set/cpu`, { cpu: 2 });
    expect(res.json()).toMatchObject({ success: false, message: 'VM is running' });
  });

  onceInCliMode('bodies are validated and the field is named', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['set/cpu', {}, 'cpu: is required'],
      ['set/cpu', { cpu: 0 }, 'cpu: must be at least 1'],
      ['set/cpu', { cpu: 33 }, 'cpu: must be at most 32'],
      ['set/cpu', { cpu: 1.5 }, 'cpu: must be an integer from 1 to 32'],
      ['set/cpu', { cpu: '2' }, 'cpu: must be an integer from 1 to 32'],
      ['set/memory', { memory: 256 }, 'memory: must be at least 512 (MB)'],
      ['set/memory', { memory: 65536 }, 'memory: must be at most 32768 (MB)'],
      ['set/disk', { disk: '0G' }, 'disk: must grow the disk by at least 1G'],
      ['set/disk', { disk: '16' }, 'disk: must be a whole number of GiB followed by G, like "16G"'],
      ['set/disk', { disk: '-5G' }, 'disk: must be a whole number of GiB followed by G, like "16G"'],
      ['set/disk', { disk: '999999G' }, 'disk: must be at most 4096G at a time'],
      ['set/disk', { disk: 16 }, 'disk: must be a string like "16G"'],
      ['set/node', {}, 'node: is required'],
      ['set/cpu', { cpu: 2, extra: 1 }, 'unknown field(s): extra'],
    ];
    for (const [op, body, message] of cases) {
      const res = await post(`/vm/${vmid}/${op}`, body);
      expect({ op, body, status: res.status, json: res.json() }).toEqual({
        op,
        body,
        status: 400,
        json: { success: false, message: `please check your input: ${message}` },
      });
    }
  });

  test('a disabled VMID gets 400 from every mutating endpoint, and leaves the list', async () => {
    const file = path.join(h.config.dataDir, 'disabled');
    fs.writeFileSync(file, `# locked by the operator\n${vmid}:life-${vmid}\n`);
    try {
      for (const op of ['start', 'reboot', 'shutdown', 'stop', 'destroy', 'set/cpu', 'set/memory', 'set/disk', 'set/node']) {
        const res = await post(`/vm/${vmid}/${op}`);
        expect({ op, status: res.status, json: res.json() }).toEqual({
          op,
          status: 400,
          json: { success: false, message: `VM ${vmid} is on the disabled list and cannot be controlled through the API` },
        });
      }
      const list = (await (await fetch(`${h.api}/vm/list`)).json()) as { list: Array<{ vmid: number; node: string }> };
      expect(list.list.map((v) => v.vmid)).not.toContain(vmid);
      // status is a read, not a control
      expect(await status(vmid)).toEqual({ status: 200, text: 'running' });
    } finally {
      fs.rmSync(file);
    }
  });
});

describe('running VM', () => {
  test('reboot streams until SSH answers again', async () => {
    const before = await operationsMark(h);
    const res = await requestSse(`${h.api}/vm/${vmid}/reboot`, { method: 'POST' });
    expectCompleted(res, 'VM reboot');
    expect(res.events.map((e) => `${e.step} ${e.status}`)).toEqual([
      'VM reboot > workflow info',
      'VM reboot > reboot processing',
      'VM reboot > reboot success',
      'VM reboot > wait for SSH processing',
      'VM reboot > wait for SSH success',
      'VM reboot > finalizing info',
    ]);
    expect(await seen('reboot', vmid, before)).toEqual([{ node: 'pve1', params: {}, ok: true }]);
    expect(await canSsh(vmid)).toBe(true);
  });

  // Both modes: its shutdown, through Proxmox, is what stops the VM for the tests after it.
  test('a second operation while one runs is refused with 409 naming the first', async () => {
    await injectFaultOn(h, { op: 'shutdown', vmid }, { latencyMs: 4000, times: 1 });
    const shutdown = post(`/vm/${vmid}/shutdown`);
    const handle = h.service.client.workflow.getHandle(`vm-${vmid}`);
    await waitFor('the shutdown workflow to hold the VM', async () => {
      const d = await handle.describe().catch(() => undefined);
      return d?.type === 'vmShutdown' && d.status.name === 'RUNNING';
    }, 5_000);
    const stop = await post(`/vm/${vmid}/stop`);
    expect(stop.status).toBe(409);
    expect(stop.json()).toEqual({
      success: false,
      message: `VM ${vmid} is busy: vmShutdown (workflow vm-${vmid}) is running on it`,
      workflowId: `vm-${vmid}`,
      operation: 'vmShutdown',
    });
    const done = await shutdown;
    expect(done).toMatchObject({ status: 200, text: 'ok' });
    expect(done.headers.get('x-workflow-id')).toBe(`vm-${vmid}`);
    expect(await status(vmid)).toEqual({ status: 200, text: 'stopped' });

    const d = await handle.describe();
    expect(d.type).toBe('vmShutdown');
    expect(d.typedSearchAttributes.get(VM_ID)).toBe(vmid);
    expect(d.typedSearchAttributes.get(VM_OPERATION)).toBe('shutdown');
    const history = await handle.fetchHistory();
    const activityTypes = history.events!.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
    expect(activityTypes).toEqual(['shutdownVm']);
  });
});

describe('stopped VM', () => {
  onceInCliMode('operations that need a running VM are refused', async () => {
    for (const op of ['shutdown', 'stop', 'reboot']) {
      const res = await post(`/vm/${vmid}/${op}`);
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({ success: false, message: 'VM is not running' });
    }
  });

  test('set/cpu sets the cores', async () => {
    expect(await post(`/vm/${vmid}/set/cpu`, { cpu: 4 })).toMatchObject({ status: 200, text: 'ok' });
    expect(await h.sandbox.readConfig(vmid)).toMatch(/^cores: 4$/m);
  });

  test('set/memory applies the balloon rule, and removes the balloon when it no longer applies', async () => {
    // VM_BALLOON_MIN=1024: 4096 MB ≥ 1024 + 1024, so balloon 4096 - 1024
    expect(await post(`/vm/${vmid}/set/memory`, { memory: 4096 })).toMatchObject({ status: 200, text: 'ok' });
    let conf = (await h.sandbox.readConfig(vmid))!;
    expect(conf).toMatch(/^memory: 4096$/m);
    expect(conf).toMatch(/^balloon: 3072$/m);
    expect(conf).toMatch(/^numa: 1$/m);
    // 1536 < 2048: no balloon, and the old 3072 (larger than the new memory) must go
    expect(await post(`/vm/${vmid}/set/memory`, { memory: 1536 })).toMatchObject({ status: 200, text: 'ok' });
    conf = (await h.sandbox.readConfig(vmid))!;
    expect(conf).toMatch(/^memory: 1536$/m);
    expect(conf).not.toMatch(/^balloon:/m);
  });

  test('set/disk grows scsi0 by the increment', async () => {
    expect(await h.sandbox.readConfig(vmid)).toMatch(/^scsi0: .*size=16G/m);
    const before = await operationsMark(h);
    expect(await post(`/vm/${vmid}/set/disk`, { disk: '8G' })).toMatchObject({ status: 200, text: 'ok' });
    expect(await h.sandbox.readConfig(vmid)).toMatch(/^scsi0: .*size=24G/m);
    // resized to an absolute size, so a retried activity cannot grow it twice
    expect(await seen('resize', vmid, before)).toEqual([{ node: 'pve1', params: { disk: 'scsi0', size: '24G' }, ok: true }]);
  });

  onceInCliMode('set/disk past VM_MAX_DISK is refused by the workflow with 400, the disk untouched', async () => {
    const res = await post(`/vm/${vmid}/set/disk`, { disk: '20G' });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({
      success: false,
      message: 'scsi0 would grow from 24G to 44G, over VM_MAX_DISK (40G)',
      type: 'InvalidRequestError',
      workflowId: `vm-${vmid}`,
    });
    expect(await h.sandbox.readConfig(vmid)).toMatch(/^scsi0: .*size=24G/m);
  });

  test('a step Proxmox refuses fails the operation: plain endpoints answer its error as JSON', async () => {
    await injectFaultOn(h, { op: 'set', vmid }, { stderr: '400 Parameter verification failed.\ncores: value must have a minimum value of 1\n', times: 1 });
    const res = await post(`/vm/${vmid}/set/cpu`, { cpu: 2 });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ success: false, type: 'ParameterError', workflowId: `vm-${vmid}` });
    expect(res.json().message).toMatch(/Parameter verification failed.*cores: value must have a minimum value of 1/);
    expect(await h.sandbox.readConfig(vmid)).toMatch(/^cores: 4$/m);
  });

  test('a failed start ends its stream with an error event at the failed step, and frees the VM', async () => {
    await injectFaultOn(h, { op: 'start', vmid }, { stderr: "you can't start a vm if it's a template", times: 1 });
    const res = await requestSse(`${h.api}/vm/${vmid}/start`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(res.closed).toBe(true);
    expect(res.events.at(-1)).toMatchObject({ step: 'VM start > start', status: 'error' });
    expect(res.events.at(-1)!.message).toMatch(/^\[-\] .*you can't start a vm if it's a template/);
    expect(await status(vmid)).toEqual({ status: 200, text: 'stopped' });
  });

  onceInCliMode('set/node to its own node or an unknown node is refused', async () => {
    let res = await post(`/vm/${vmid}/set/node`, { node: 'pve1' });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ success: false, message: `VM ${vmid} is already on node pve1` });
    res = await post(`/vm/${vmid}/set/node`, { node: 'pve9' });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ success: false, message: "please check your input: node: must be one of the cluster's nodes (pve1, pve2)" });
  });
});

describe('migration', () => {
  test('set/node migrates to pve2 with local disks, streaming the migration\'s output', async () => {
    const before = await operationsMark(h);
    const res = await requestSse(`${h.api}/vm/${vmid}/set/node`, { body: { node: 'pve2' } });
    expectCompleted(res, 'VM migration');
    const output = res.events.filter((e) => e.step === 'VM migration > migrate' && e.status === 'processing' && !e.message.startsWith('[*]'));
    expect(output.some((e) => /starting migration of VM/.test(e.message))).toBe(true);
    expect(output.some((e) => /migration finished successfully/.test(e.message))).toBe(true);
    expect(await seen('migrate', vmid, before)).toEqual([{ node: 'pve1', params: { target: 'pve2', 'with-local-disks': '1' }, ok: true }]);
    const list = (await (await fetch(`${h.api}/vm/list`)).json()) as { list: Array<{ vmid: number; node: string }> };
    expect(list.list.find((v) => v.vmid === vmid)?.node).toBe('pve2');
    expect(await status(vmid)).toEqual({ status: 200, text: 'stopped' });
  });

  test('start on pve2 streams until SSH answers; stop there; then back to pve1', async () => {
    let before = await operationsMark(h);
    const res = await requestSse(`${h.api}/vm/${vmid}/start`, { method: 'POST' });
    expectCompleted(res, 'VM start');
    expect(res.events.map((e) => `${e.step} ${e.status}`)).toEqual([
      'VM start > workflow info',
      'VM start > start processing',
      'VM start > start success',
      'VM start > wait for SSH processing',
      'VM start > wait for SSH success',
      'VM start > finalizing info',
    ]);
    expect(await seen('start', vmid, before)).toEqual([{ node: 'pve2', params: {}, ok: true }]);
    expect(await canSsh(vmid)).toBe(true);
    expect(await status(vmid)).toEqual({ status: 200, text: 'running' });

    before = await operationsMark(h);
    expect(await post(`/vm/${vmid}/stop`)).toMatchObject({ status: 200, text: 'ok' });
    expect(await seen('stop', vmid, before)).toEqual([{ node: 'pve2', params: {}, ok: true }]);
    expect(await status(vmid)).toEqual({ status: 200, text: 'stopped' });
    expect(await canSsh(vmid)).toBe(false);

    // Another task holds the VM's config lock: the migration's first try times out on it
    // as Proxmox's does (QemuMigrate lock_config), and the retry after it is released succeeds.
    before = await operationsMark(h);
    const lock = h.sandbox.holdVmLock(vmid);
    const pending = requestSse(`${h.api}/vm/${vmid}/set/node`, { body: { node: 'pve1' } });
    try {
      await eventually(async () => expect(await seen('migrate', vmid, before)).toEqual([expect.objectContaining({ ok: false })]), 30_000);
    } finally {
      lock.release();
    }
    const back = await pending;
    expectCompleted(back, 'VM migration');
    expect((await seen('migrate', vmid, before)).map(({ node, params, ok }) => [node, params.target, ok])).toEqual([
      ['pve2', 'pve1', false],
      ['pve2', 'pve1', true],
    ]);
    const list = (await (await fetch(`${h.api}/vm/list`)).json()) as { list: Array<{ vmid: number; node: string }> };
    expect(list.list.find((v) => v.vmid === vmid)?.node).toBe('pve1');
  });
});

describe('start and re-attach', () => {
  onceInCliMode('a client that drops the start stream re-attaches with Last-Event-ID and gets the rest', async () => {
    const first = await requestSse(`${h.api}/vm/${vmid}/start`, { method: 'POST', stopAfter: 2 });
    expect(first.events.map((e) => e.id)).toEqual([1, 2]);
    const rest = await requestSse(`${h.api}/workflows/vm-${vmid}/events`, { headers: { 'Last-Event-ID': '2' } });
    expect(rest.closed).toBe(true);
    expect(rest.events[0].id).toBe(3);
    expect(rest.events.at(-1)).toMatchObject({ step: 'VM start > finalizing', status: 'info' });
    expect(rest.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(await canSsh(vmid)).toBe(true);
    expect(await status(vmid)).toEqual({ status: 200, text: 'running' });
  });

  onceInCliMode('stop, then start right after the stream ends, is not refused as busy', async () => {
    expect(await post(`/vm/${vmid}/stop`)).toMatchObject({ status: 200, text: 'ok' });
    const res = await requestSse(`${h.api}/vm/${vmid}/start`, { method: 'POST' });
    expectCompleted(res, 'VM start');
    // the start workflow may still be closing when its stream ends
    expect(await post(`/vm/${vmid}/stop`)).toMatchObject({ status: 200, text: 'ok' });
  });
});

describe('an install holds its VMID', () => {
  onceInCliMode('operations on a VM being installed get 409 naming the install; destroy purges it afterwards', async () => {
    const id = 150;
    await injectFaultOn(h, { op: 'importdisk', vmid: id }, { latencyMs: 6000, times: 1 });
    const installing = requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id, name: 'held' } });
    // Refused once the install has started and visibility shows it.
    const res = await waitFor('a 409 naming the install', async () => {
      const r = await post(`/vm/${id}/set/cpu`, { cpu: 2 });
      return r.status === 409 && r;
    }, 5_000);
    expect(res.json()).toMatchObject({ success: false, operation: 'installVm' });
    expect(res.json().message).toMatch(new RegExp(`^VM ${id} is busy: installVm \\(workflow install-[0-9a-f-]+\\) is running on it$`));
    const done = await installing;
    expect(done.events.filter((e) => e.status === 'error')).toEqual([]);
    expect((await seen('create', id)).map(({ node, ok }) => ({ node, ok }))).toEqual([{ node: 'pve1', ok: true }]);

    // finished: the VM is free again
    expect(await post(`/vm/${id}/stop`)).toMatchObject({ status: 200, text: 'ok' });
    expect(await post(`/vm/${id}/destroy`)).toMatchObject({ status: 200, text: 'ok' });
    expect(await h.sandbox.readConfig(id)).toBeUndefined();
    expect((await status(id)).status).toBe(404);
    expect(await seen('destroy', id)).toEqual([{ node: 'pve1', params: { purge: '1' }, ok: true }]);
  });
});
