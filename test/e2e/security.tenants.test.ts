import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { type InstallSpec, vmSearchAttributes, type Workflows } from '../../contract';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { toInstallSpec } from '../../api/installRequest';
import { startHarness, type Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * Tenants: a token belongs to one (API_TOKENS_FILE's `tenant=`, else its own), and the read
 * and operate roles see and act on that tenant's VMs only; another tenant's VM answers as a
 * VMID nobody uses. Templates are changed by their build and the admin role only, Proxmox's
 * `protection` guards them, and a build holds its VM against the per-VM operations.
 */

const MINUTES = 60_000;
const ALICE = 'alice-ci-token-0123456789';
const ALICE_BOT = 'alice-bot-token-0123456789';
const ALICE_READ = 'alice-read-token-0123456789';
const BOB = 'bob-token-0123456789abcdef';
const ADMIN = 'admin-token-0123456789abcdef';

let h: Harness;
let tokensDir: string;

beforeAll(async () => {
  tokensDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-tenants-'));
  const file = path.join(tokensDir, 'tokens');
  fs.writeFileSync(
    file,
    [
      `operate ${ALICE} alice-ci tenant=team-a`,
      `operate ${ALICE_BOT} alice-bot tenant=team-a`,
      `read ${ALICE_READ} alice-grafana tenant=team-a`,
      // No tenant: bob is a tenant of his own, as every token was before tenants.
      `operate ${BOB} bob`,
      `admin ${ADMIN} root-admin`,
    ].join('\n'),
    { mode: 0o600 },
  );
  h = await startHarness({ API_TOKENS_FILE: file }, { storageContent: { local: ['backup', 'images', 'import', 'iso', 'vztmpl'] } });
}, 5 * MINUTES);

afterAll(async () => {
  await h?.stop();
  fs.rmSync(tokensDir, { recursive: true, force: true });
});

async function as(token: string, method: string, p: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${h.api}${p}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(method === 'GET' ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text.startsWith('{') || text.startsWith('"') ? JSON.parse(text) : text };
}

/** The install workflow of each VM installed here. */
const installOf = new Map<number, string>();

async function install(token: string, name: string): Promise<number> {
  const res = await requestSse(`${h.api}/vm/install`, {
    body: { os: 'debian', version: '12', name },
    headers: { Authorization: `Bearer ${token}` },
    timeoutMs: 10 * MINUTES,
  });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const workflowId = String(res.headers['x-workflow-id']);
  const vmid = Number(/^\[\*\] VMID: (\d+)$/m.exec(res.events.map((e) => e.message).join('\n'))?.[1]);
  expect(vmid).toBeGreaterThan(0);
  installOf.set(vmid, workflowId);
  return vmid;
}

const listed = async (token: string) => ((await as(token, 'GET', '/vm/list')).json as { list: Array<{ vmid: number }> }).list.map((v) => v.vmid);

function qm(args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor('pve1') }, reject: false });
}

let vmA: number;
let vmB: number;

describe('operate acts on its tenant’s VMs only', () => {
  beforeAll(async () => {
    [vmA, vmB] = await Promise.all([install(ALICE, 'team-a-vm'), install(BOB, 'bob-vm')]);
  }, 10 * MINUTES);

  test("every change to another tenant's VM answers as a VMID nobody uses, and nothing reaches the cluster", async () => {
    const before = await h.sandbox.readConfig(vmB);
    const since = new Date();
    const requests: Array<[string, unknown]> = [
      ['stop', undefined],
      ['shutdown', undefined],
      ['reboot', undefined],
      ['start', undefined],
      ['set/cpu', { cpu: 3 }],
      ['set/memory', { memory: 1024 }],
      ['set/disk', { disk: '8G' }],
      ['set/node', { node: 'pve2' }],
      ['destroy', undefined],
      ['rebuild', {}],
    ];
    for (const [op, body] of requests) {
      const res = await as(ALICE, 'POST', `/vm/${vmB}/${op}`, body);
      expect([op, res]).toEqual([op, { status: 404, json: { success: false, message: `VM ${vmB} does not exist` } }]);
    }
    expect(await as(ALICE, 'GET', `/vm/${vmB}/status`)).toEqual({ status: 404, json: { success: false, message: `VM ${vmB} does not exist` } });
    // The answer for a VMID nobody uses, word for word.
    expect(await as(ALICE, 'POST', '/vm/253/stop')).toEqual({ status: 404, json: { success: false, message: 'VM 253 does not exist' } });
    expect(await h.sandbox.readConfig(vmB)).toBe(before);
    const latest = await h.service.client.workflow.getHandle(`vm-${vmB}`).describe().catch(() => undefined);
    expect(latest === undefined || latest.startTime < since).toBe(true);
  });

  test('listing shows a read or operate token its tenant’s VMs, the admin every VM', async () => {
    expect(await listed(ALICE)).toContain(vmA);
    expect(await listed(ALICE)).not.toContain(vmB);
    expect(await listed(ALICE_READ)).toEqual(await listed(ALICE));
    expect(await listed(BOB)).toContain(vmB);
    expect(await listed(BOB)).not.toContain(vmA);
    expect(await listed(ADMIN)).toEqual(expect.arrayContaining([vmA, vmB]));
  });

  test("another tenant's install run, its progress and its VM's runs answer as workflows nobody started", async () => {
    const runOfB = installOf.get(vmB)!;
    for (const p of [`/workflows/${runOfB}`, `/workflows/${runOfB}/steps`, `/workflows/${runOfB}/events`, `/vm/install/${runOfB}`, `/vm/install/${runOfB}/events`]) {
      expect([p, await as(ALICE_READ, 'GET', p)]).toEqual([p, { status: 404, json: { success: false, message: `no workflow ${runOfB}` } }]);
    }
    expect(await as(ALICE, 'POST', `/workflows/${runOfB}/cancel`)).toEqual({ status: 404, json: { success: false, message: `no workflow ${runOfB}` } });
    expect(((await as(ALICE_READ, 'GET', `/vm/${vmB}/runs`)).json as { runs: unknown[] }).runs).toEqual([]);
    // The tenant's own runs, to any of its tokens, and every run to the admin.
    const runOfA = installOf.get(vmA)!;
    expect(await as(ALICE_READ, 'GET', `/workflows/${runOfA}`)).toMatchObject({ status: 200, json: { workflowId: runOfA, status: 'COMPLETED' } });
    expect(await as(ALICE_BOT, 'GET', `/workflows/${runOfA}/steps`)).toMatchObject({ status: 200, json: { workflowId: runOfA } });
    expect(((await as(ALICE_READ, 'GET', `/vm/${vmA}/runs`)).json as { runs: Array<{ workflowId: string }> }).runs.map((r) => r.workflowId)).toContain(runOfA);
    expect(await as(ADMIN, 'GET', `/workflows/${runOfB}`)).toMatchObject({ status: 200, json: { workflowId: runOfB } });
    expect(((await as(ADMIN, 'GET', `/vm/${vmB}/runs`)).json as { runs: Array<{ workflowId: string }> }).runs.map((r) => r.workflowId)).toContain(runOfB);
  });

  test("a rebuild's install, which records no starter of its own, is among its tenant's runs of the VM, and no one else's", async () => {
    const res = await requestSse(`${h.api}/vm/${vmA}/rebuild`, { body: {}, headers: { Authorization: `Bearer ${ALICE_BOT}` }, timeoutMs: 10 * MINUTES });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    const { installWorkflowId } = await h.service.client.workflow.getHandle(`vm-${vmA}`).result();
    expect(installWorkflowId).toMatch(new RegExp(`^vm-${vmA}-install-`));
    const runsOf = async (token: string) => ((await as(token, 'GET', `/vm/${vmA}/runs`)).json as { runs: Array<{ workflowId: string }> }).runs.map((r) => r.workflowId);
    expect(await runsOf(ALICE_READ)).toEqual(expect.arrayContaining([`vm-${vmA}`, installWorkflowId, installOf.get(vmA)]));
    expect(await runsOf(ADMIN)).toEqual(expect.arrayContaining([`vm-${vmA}`, installWorkflowId]));
    expect(await runsOf(BOB)).toEqual([]);
  });

  test('an admin adopts a VM for a tenant: its tokens see and act on it, others get 404', async () => {
    const VMID = 252;
    expect((await qm(['create', String(VMID), '--name', 'made-by-hand', '--memory', '512'])).exitCode).toBe(0);
    expect(await as(ADMIN, 'POST', `/vm/${VMID}/adopt`, { tenant: 'no such/tenant' })).toMatchObject({ status: 400, json: { message: expect.stringMatching(/tenant/) } });
    expect(await as(ALICE, 'POST', `/vm/${VMID}/adopt`, { tenant: 'team-a' })).toMatchObject({ status: 403 });
    expect(await as(ADMIN, 'POST', `/vm/${VMID}/adopt`, { tenant: 'team-a' })).toMatchObject({ status: 200 });
    expect(parseVmConfig((await h.sandbox.readConfig(VMID))!).description).toMatch(/^qemurun-adopted=.* tenant=team-a$/m);
    expect(await listed(ALICE_READ)).toContain(VMID);
    expect(await listed(BOB)).not.toContain(VMID);
    expect(await as(ALICE_BOT, 'POST', `/vm/${VMID}/set/memory`, { memory: 1024 })).toEqual({ status: 200, json: 'ok' });
    expect(await as(BOB, 'POST', `/vm/${VMID}/set/memory`, { memory: 768 })).toEqual({ status: 404, json: { success: false, message: `VM ${VMID} does not exist` } });
  });

  test('honest callers keep what they had: a tenant’s tokens share its VMs, the admin acts on all', async () => {
    expect(await as(ALICE_BOT, 'POST', `/vm/${vmA}/stop`)).toEqual({ status: 200, json: 'ok' });
    expect(await as(ALICE, 'POST', `/vm/${vmA}/set/cpu`, { cpu: 2 })).toEqual({ status: 200, json: 'ok' });
    expect(await as(ALICE_READ, 'GET', `/vm/${vmA}/status`)).toEqual({ status: 200, json: 'stopped' });
    expect(await as(BOB, 'POST', `/vm/${vmB}/stop`)).toEqual({ status: 200, json: 'ok' });
    expect(await as(ADMIN, 'POST', `/vm/${vmB}/set/memory`, { memory: 1024 })).toEqual({ status: 200, json: 'ok' });
    expect(parseVmConfig((await h.sandbox.readConfig(vmB))!).entries.memory).toBe('1024');
  });

  test('the tenant is in the sealed markers: written into the Notes, it makes the VM unmanaged, not another tenant’s', async () => {
    const conf = parseVmConfig((await h.sandbox.readConfig(vmB))!);
    const forged = (conf.description ?? '').replace(/^qemurun-spec=(\S+)$/m, (_l, v: string) => {
      const spec = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as InstallSpec;
      return `qemurun-spec=${Buffer.from(JSON.stringify({ ...spec, tenant: 'team-a' })).toString('base64url')}`;
    });
    expect(forged).not.toBe(conf.description);
    expect((await qm(['set', String(vmB), '--description', forged])).exitCode).toBe(0);
    const res = await as(ALICE, 'POST', `/vm/${vmB}/start`);
    expect(res.status).toBe(409);
    expect(res.json).toEqual(expect.objectContaining({ type: 'NotManagedError' }));
    expect((await qm(['set', String(vmB), '--description', conf.description ?? ''])).exitCode).toBe(0);
  });
});

describe('VMs installed before tenants', () => {
  let legacy: number;

  beforeAll(async () => {
    // As the API started installs before tenants: no tenant in the spec, the token's name in the memo.
    const { spec, secrets } = toInstallSpec({ os: 'debian', version: '12', name: 'legacy' }, h.config, ['pve1', 'pve2']);
    expect(spec.tenant).toBeUndefined();
    const handle = await h.service.client.workflow.start<Workflows['installVm']>('installVm', {
      taskQueue: h.config.temporal.taskQueue,
      workflowId: `install-legacy-${Date.now()}`,
      args: [{ spec, secrets }],
      typedSearchAttributes: vmSearchAttributes('install', spec),
      memo: { request: spec, startedBy: 'bob' },
    });
    legacy = (await handle.result()).vmid;
  }, 10 * MINUTES);

  test('belong to the tenant of the token that installed them: with the default, to that token', async () => {
    expect(await as(ALICE, 'POST', `/vm/${legacy}/stop`)).toEqual({ status: 404, json: { success: false, message: `VM ${legacy} does not exist` } });
    expect(await listed(BOB)).toContain(legacy);
    expect(await listed(ALICE)).not.toContain(legacy);
    expect(await as(BOB, 'POST', `/vm/${legacy}/stop`)).toEqual({ status: 200, json: 'ok' });
  });
});

test("a schedule's own spec records the admin token's tenant, as an admin's install does", async () => {
  const made = await as(ADMIN, 'POST', '/schedules', { id: 'tenants-spec', spec: { os: 'debian', version: '12', id: 230 }, cron: '0 3 * * *' });
  expect(made.status).toBe(201);
  expect((made.json as { schedule: { spec: InstallSpec } }).schedule.spec.tenant).toBe('root-admin');
  expect((await as(ADMIN, 'DELETE', '/schedules/tenants-spec')).status).toBe(200);
});

describe('templates', () => {
  let template: number;

  test('a build holds its VM: a reboot sent during it is refused (409) naming the build', async () => {
    const started = await as(ADMIN, 'POST', '/templates', { os: 'debian', version: '12' });
    expect(started.status).toBe(202);
    const workflowId = (started.json as { workflowId: string }).workflowId;
    let reboot: Promise<{ status: number; json: unknown }> | undefined;
    const res = await requestSse(`${h.api}/workflows/${encodeURIComponent(workflowId)}/events`, {
      headers: { Authorization: `Bearer ${ADMIN}` },
      timeoutMs: 10 * MINUTES,
      onEvent: (e) => {
        const made = /VMID (\d+), IP /.exec(e.message);
        if (made) template = Number(made[1]);
        // The VM runs from here until the build shuts it down.
        if (e.step === 'VM initialization > init script' && reboot === undefined) reboot = as(ADMIN, 'POST', `/vm/${template}/reboot`);
      },
    });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(reboot).toBeDefined();
    expect(await reboot).toEqual({
      status: 409,
      json: { success: false, message: `VM ${template} is busy: buildTemplate (workflow ${workflowId}) is running on it`, workflowId, operation: 'buildTemplate' },
    });
  }, 10 * MINUTES);

  test('operate tokens cannot change a template; Proxmox’s protection guards it from everyone', async () => {
    const before = await h.sandbox.readConfig(template);
    const refused = { status: 403, json: { success: false, role: 'admin', message: `VM ${template} is a template: only its build workflow and the admin role change it` } };
    for (const [op, body] of [
      ['set/cpu', { cpu: 4 }],
      ['set/disk', { disk: '8G' }],
      ['set/node', { node: 'pve2' }],
      ['destroy', undefined],
      ['start', undefined],
      ['rebuild', {}],
    ] as const) {
      expect([op, await as(ALICE, 'POST', `/vm/${template}/${op}`, body)]).toEqual([op, refused]);
    }
    expect(await h.sandbox.readConfig(template)).toBe(before);
    const conf = parseVmConfig(before!);
    expect(conf.entries.template).toBe('1');
    expect(conf.entries.protection).toBe('1');
    expect(await as(ADMIN, 'POST', `/vm/${template}/destroy`)).toEqual({
      status: 409,
      json: { success: false, message: `VM ${template} is protected (protection: 1): turn protection off in Proxmox first to destroy it` },
    });
    const destroyed = await qm(['destroy', String(template)]);
    expect(destroyed.exitCode).not.toBe(0);
    expect(destroyed.stderr).toContain(`can't remove VM ${template} - protection mode enabled`);
    const drive = await qm(['set', String(template), '--delete', 'scsi0']);
    expect(drive.exitCode).not.toBe(0);
    expect(drive.stderr).toContain("can't remove drive 'scsi0' - protection mode enabled");
    expect(parseVmConfig((await h.sandbox.readConfig(template))!).entries.template).toBe('1');
  });
});
