import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { temporal } from '@temporalio/proto';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { addressPoolWorkflowId, type AddressLease } from '../../contract';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { staticAddressOf } from '../../lib/vm/address';

/**
 * Address leases come back (real service, Temporal dev server, sandbox): an install
 * terminated through Temporal and a VM destroyed with `qm destroy` behind QemuRun's back give
 * their addresses back at the next reconcile, while a running install's lease (made, its VM
 * not yet) and a living VM's stay; an admin releases one lease by hand; one tenant (whichever
 * of its tokens asks) fills no pool past its maxLeasesPerHolder; a template build leases its address like an install; and
 * a release update recorded in the pool's history, sent again raw after the address was
 * leased anew, leaves the new lease alone.
 */

let h: Harness;
const OPERATOR = 'operator-token-0123456789';
const OTHER = 'operator-two-token-0123456789';
// A second token of OPERATOR's tenant: the quota is the tenant's, not each token's.
const SAME_TENANT = 'operator-web-token-0123456789';
const ADMIN = 'admin-token-0123456789abcdef';
// `lab` covers GATEWAY's /24 from .100 on: the addresses a build without a lease would take.
const POOLS = [
  { name: 'lab', cidr: '127.0.0.0/24', gateway: '127.0.0.1', reserved: ['127.0.0.2-127.0.0.99'] },
  { name: 'small', cidr: '127.1.0.0/24', gateway: '127.1.0.1', maxLeasesPerHolder: 2 },
];
const MINUTES = 60_000;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-leases-'));
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `operate ${OPERATOR} ci tenant=web\noperate ${SAME_TENANT} ci-b tenant=web\noperate ${OTHER} ci2\nadmin ${ADMIN} alice\n`, { mode: 0o600 });
  h = await startHarness({ ADDRESS_POOLS: JSON.stringify(POOLS), API_TOKENS_FILE: tokens, ANONYMOUS_ACCESS: 'read' });
}, 5 * MINUTES);

afterAll(async () => {
  await h?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(token: string | undefined, method: string, p: string, body?: unknown, extra: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(`${h.api}${p}`, {
    method,
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(method === 'GET' ? {} : { 'Content-Type': 'application/json' }), ...extra },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text.startsWith('{') ? JSON.parse(text) : text };
}

/** An install started with `Prefer: respond-async`: its workflow id and status resource. */
async function startInstall(body: Record<string, unknown>, token = OPERATOR): Promise<{ workflowId: string; location: string }> {
  const res = await call(token, 'POST', '/vm/install', { os: 'debian', version: '12', ...body }, { Prefer: 'respond-async' });
  expect([res.status, res.json]).toEqual([202, expect.objectContaining({ workflowId: expect.any(String) })]);
  return { workflowId: res.json.workflowId, location: res.json.status };
}

async function pollStatus(location: string, done: (s: any) => boolean): Promise<any> {
  for (let i = 0; i < 3000; i++) {
    const s = (await (await fetch(new URL(location, h.service.url), { headers: { Authorization: `Bearer ${ADMIN}` } })).json()) as any;
    if (done(s)) return s;
    if (s.status !== 'RUNNING') throw new Error(`${location} closed as ${s.status} (${JSON.stringify(s)})`);
    await sleep(100);
  }
  throw new Error(`${location}: polling budget spent`);
}

async function leases(pool = 'lab'): Promise<AddressLease[]> {
  const res = await call(undefined, 'GET', '/address-pools');
  expect(res.status).toBe(200);
  return res.json.pools.find((p: { name: string }) => p.name === pool).leases;
}

function qm(args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } });
}

async function addressOf(vmid: number): Promise<string | undefined> {
  const text = await h.sandbox.readConfig(vmid);
  return text === undefined ? undefined : staticAddressOf(parseVmConfig(text).entries.ipconfig0);
}

test(
  'reconcile gives back the leases of a terminated install and of a VM destroyed behind QemuRun; a running install and a living VM keep theirs',
  async () => {
    // A VM that lives, and one destroyed later with qm, behind QemuRun's back.
    const living = await startInstall({ name: 'living' });
    const livingVm = await pollStatus(living.location, (s) => s.status === 'COMPLETED');
    const doomed = await startInstall({ name: 'doomed' });
    const doomedVm = await pollStatus(doomed.location, (s) => s.status === 'COMPLETED');
    await qm(['stop', String(doomedVm.vmid)]);
    await qm(['destroy', String(doomedVm.vmid)]);

    // An install terminated through Temporal after its VM was made: terminate runs no compensation.
    await h.sandbox.injectFault({ command: 'qm start', hangMs: 8000, times: 1 });
    const cut = await startInstall({ name: 'cut' });
    const cutVm = await pollStatus(cut.location, (s) => s.step === 'VM initialization > start' && s.vmid !== undefined);
    await h.service.client.workflow.getHandle(cut.workflowId).terminate('operator gave up');
    const cutAddress = (await leases()).find((l) => l.owner === cut.workflowId)?.address;
    expect(cutAddress).toBeDefined();

    // An install that holds its lease and has not made its VM yet: its `qm create` hangs.
    await h.sandbox.injectFault({ command: 'qm create', hangMs: 20_000, times: 1 });
    const early = await startInstall({ name: 'early' });
    await pollStatus(early.location, (s) => s.step === 'VM creation > qm create');
    for (let i = 0; i < 100 && !(await leases()).some((l) => l.owner === early.workflowId); i++) await sleep(100);
    const before = await leases();
    expect(before.map((l) => l.owner).sort()).toEqual([living.workflowId, doomed.workflowId, cut.workflowId, early.workflowId].sort());

    const run = await call(ADMIN, 'POST', '/reconcile');
    expect(run.status).toBe(200);
    expect([...run.json.released].sort()).toEqual([doomedVm.ip, cutAddress].sort());
    const byOwner = Object.fromEntries((run.json.leases as Array<{ owner: string }>).map((l) => [l.owner, l]));
    expect(byOwner[doomed.workflowId]).toMatchObject({ action: 'released', reason: expect.stringMatching(`VM ${doomedVm.vmid} is gone and its owner ${doomed.workflowId} closed as completed`) });
    expect(byOwner[cut.workflowId]).toMatchObject({ action: 'released', reason: expect.stringMatching(/closed as terminated/) });
    expect(byOwner[living.workflowId]).toMatchObject({ action: 'keep', reason: `VM ${livingVm.vmid} uses it` });
    expect(byOwner[early.workflowId]).toMatchObject({ action: 'keep', reason: `its owner ${early.workflowId} is running` });
    expect(run.json.removed).toEqual([cutVm.vmid]);

    const after = await leases();
    expect(after.map((l) => l.owner).sort()).toEqual([living.workflowId, early.workflowId].sort());
    // The early install finishes on its lease; the freed addresses go to the next installs.
    const earlyVm = await pollStatus(early.location, (s) => s.status === 'COMPLETED');
    expect(earlyVm.ip).toBe(after.find((l) => l.owner === early.workflowId)!.address);
    const next = await startInstall({ ip: doomedVm.ip });
    expect((await pollStatus(next.location, (s) => s.status === 'COMPLETED')).ip).toBe(doomedVm.ip);
  },
  10 * MINUTES,
);

test('an admin releases one lease; operate may not; a lease or pool that is not there is 404, a bad address 400', async () => {
  const held = (await leases())[0];
  expect(held).toBeDefined();
  // Its VM gone behind QemuRun (the reconciler would release it too): the admin does not wait.
  await qm(['stop', String(held.vmid)]);
  await qm(['destroy', String(held.vmid)]);
  const route = `/address-pools/lab/leases/${held.address}`;
  expect(await call(OPERATOR, 'DELETE', route)).toEqual({ status: 403, json: { success: false, message: 'this needs the admin role; token ci has the operate role', role: 'admin' } });
  expect((await call(undefined, 'DELETE', route)).status).toBe(401);
  expect((await leases()).some((l) => l.address === held.address)).toBe(true);
  const released = await call(ADMIN, 'DELETE', route);
  expect(released).toEqual({ status: 200, json: { success: true, pool: 'lab', released: held } });
  expect((await leases()).some((l) => l.address === held.address)).toBe(false);
  expect(await call(ADMIN, 'DELETE', route)).toEqual({ status: 404, json: { success: false, message: `address pool 'lab' has no lease of ${held.address}` } });
  expect((await call(ADMIN, 'DELETE', `/address-pools/nope/leases/${held.address}`)).status).toBe(404);
  expect(await call(ADMIN, 'DELETE', '/address-pools/lab/leases/not-an-ip')).toEqual({ status: 400, json: { success: false, message: 'please check your input: address: must be an IPv4 address like 192.0.2.10' } });
});

test(
  "one tenant's tokens together get the leases its pool allows and then a 429 naming the pool and the quota, before any VM is made; another tenant still gets its own",
  async () => {
    const first = await Promise.all([startInstall({ addressPool: 'small' }, OPERATOR), startInstall({ addressPool: 'small' }, SAME_TENANT)]);
    await Promise.all(first.map((i) => pollStatus(i.location, (s) => s.status === 'COMPLETED')));
    const creates = (await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm' && c.argv[1] === 'create').length;
    for (const token of [OPERATOR, SAME_TENANT]) {
      const refused = await call(token, 'POST', '/vm/install', { os: 'debian', version: '12', addressPool: 'small' }, { Prefer: 'respond-async' });
      expect(refused).toEqual({
        status: 429,
        json: {
          success: false,
          message: "addressPool: address pool 'small' allows 2 lease(s) per holder (maxLeasesPerHolder) and tenant:web holds 2: destroy a VM of the pool first",
          pool: 'small',
          maxLeasesPerHolder: 2,
        },
      });
    }
    expect((await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm' && c.argv[1] === 'create')).toHaveLength(creates);
    // The pool named by address is the same pool, and the same quota.
    expect((await call(OPERATOR, 'POST', '/vm/install', { os: 'debian', version: '12', ip: '127.1.0.50' })).status).toBe(429);
    const other = await startInstall({ addressPool: 'small' }, OTHER);
    expect((await pollStatus(other.location, (s) => s.status === 'COMPLETED')).ip).toMatch(/^127\.1\.0\./);
    // The worker counts by the same holder: the tenant the install's spec names.
    expect((await leases('small')).map((l) => l.holder).sort()).toEqual(['tenant:ci2', 'tenant:web', 'tenant:web']);
  },
  10 * MINUTES,
);

test(
  'a template build leases its address from the pool, so no install gets it while the build lives, and gives it back once the VM is a template',
  async () => {
    await h.sandbox.injectFault({ command: 'qm shutdown', hangMs: 6000, times: 1 });
    const res = await call(ADMIN, 'POST', '/templates', { os: 'debian', version: '12' });
    expect(res.status).toBe(202);
    const build: string = res.json.workflowId;
    // The build's VM is made (its lease comes first) and holds the address until it is a template.
    const { vmid } = (await pollStatus(`/api/workflows/${encodeURIComponent(build)}`, (s) => s.vmid !== undefined && s.step !== 'VM creation > qm create')) as { vmid: number };
    const address = (await leases()).find((l) => l.owner === build && l.vmid === vmid)?.address;
    expect(address).toMatch(/^127\.0\.0\.\d+$/);
    // An install asking for the build's address is refused while the build holds it.
    const taken = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ip: address }, headers: { Authorization: `Bearer ${OPERATOR}` } });
    expect(taken.events.at(-1)).toMatchObject({ status: 'error', message: expect.stringContaining(`${address!} is leased to VM ${vmid}`) });
    await h.service.client.workflow.getHandle(build).result();
    expect(await addressOf(vmid)).toBe(address);
    expect((await leases()).some((l) => l.owner === build)).toBe(false);
  },
  10 * MINUTES,
);

test('a release update recorded in the pool\'s history, sent again raw after the address was leased anew, leaves the new lease alone', async () => {
  const install = async (body: Record<string, unknown>) => pollStatus((await startInstall(body)).location, (s) => s.status === 'COMPLETED');
  const first = await install({ id: 200, ip: '127.0.0.200' });
  expect((await call(OPERATOR, 'POST', '/vm/200/stop')).status).toBe(200);
  expect((await call(OPERATOR, 'POST', '/vm/200/destroy')).status).toBe(200);
  expect((await leases()).some((l) => l.address === first.ip)).toBe(false);
  const second = await install({ id: 200, ip: '127.0.0.200' });
  const fresh = (await leases()).find((l) => l.address === second.ip)!;
  expect(fresh).toMatchObject({ vmid: 200 });

  // What an attacker with the dev server's address can do: copy the destroy's release, its
  // payload sealed as recorded, out of the pool's history, and send it again.
  const workflowId = addressPoolWorkflowId('lab');
  const { client } = h.service;
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const releases = (history.events ?? [])
    .map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest)
    .filter((r): r is temporal.api.update.v1.IRequest => r?.input?.name === 'release');
  expect(releases.length).toBeGreaterThan(0);
  for (const recorded of releases) {
    for (const updateId of [recorded.meta!.updateId!, `${recorded.meta!.updateId}-again`]) {
      await client.workflowService.updateWorkflowExecution({
        namespace: h.config.temporal.namespace,
        workflowExecution: { workflowId },
        request: { meta: { updateId, identity: 'attacker' }, input: { name: 'release', args: recorded.input!.args } },
        waitPolicy: { lifecycleStage: temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED },
      });
    }
  }
  expect((await leases()).find((l) => l.address === second.ip)).toEqual(fresh);
  // So the next install asking for the address is refused, not handed a running VM's.
  const clash = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ip: second.ip }, headers: { Authorization: `Bearer ${OPERATOR}` } });
  expect(clash.events.at(-1)).toMatchObject({ status: 'error', message: expect.stringContaining(`${second.ip} is leased to VM 200`) });
});
