import fs from 'node:fs';
import { execa } from 'execa';
import { installedDescription, type ReconcileItem, specMarkerValue } from '../../contract';
import { createExecutors } from '../../lib/executor';
import { connectCluster } from '../../lib/proxmox';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { resealLegacyMarkers } from '../../lib/vm/reseal';
import { testSpawner } from '../support/spawner';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { vmInstanceOf } from '../../lib/proxmox/vmInstance';
import { stateFiles } from '../../lib/stateFiles';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { requestSse } from '../support/sse';
import { waitFor } from '../../sandbox/testkit';

/**
 * Sealed markers copied from a destroyed VM. A VMID is reused once its VM is gone, and anyone
 * with `VM.Config.Options` can write a VM's Notes: the seal covers the VMID, so a destroyed
 * VM's sealed description pasted into a later VM at the same VMID verified, and QemuRun took
 * that VM for its own (set/cpu, destroy, rebuild; the reconciler's removal when the markers
 * were a cancelled install's). The seal now names the VM instance, its SMBIOS uuid, which
 * Proxmox writes anew for every VM: such markers are refused, and say they were copied.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ RECONCILE_INTERVAL: '1h' });
});

afterAll(async () => {
  await h?.stop();
});

function qm(...args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } });
}

async function conf(vmid: number) {
  const raw = await h.sandbox.readConfig(vmid);
  return raw === undefined ? undefined : parseVmConfig(raw);
}

/** A VM of someone else's at `vmid`, made in Proxmox, carrying the Notes a destroyed VM had there. */
async function squatter(vmid: number, description: string): Promise<string> {
  expect((await qm('create', String(vmid), '--name', 'squatter', '--cores', '1', '--memory', '512')).exitCode).toBe(0);
  expect((await qm('set', String(vmid), '--description', description)).exitCode).toBe(0);
  return (await h.sandbox.readConfig(vmid))!;
}

async function reconcileItem(method: 'GET' | 'POST', vmid: number): Promise<ReconcileItem> {
  const res = await apiCall(h.api, method, '/reconcile');
  expect(res.status).toBe(200);
  return (res.json.vms as ReconcileItem[]).find((v) => v.vmid === vmid)!;
}

const COPIED = /its qemurun-owner marker is not trusted: its markers were copied from another VM instance \(sealed for SMBIOS uuid [0-9a-f-]{36}, this VM's is [0-9a-f-]{36}\)/;

test("a destroyed VM's sealed Notes on a later VM at its VMID: set/cpu, destroy and rebuild are 409, the reconciler keeps it; honest operations run", async () => {
  const VMID = 171;
  // An honest install: the markers written at qm create name the uuid QemuRun gave the VM.
  const install = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, name: 'honest' } });
  expect(install.events.filter((e) => e.status === 'error')).toEqual([]);
  const first = (await conf(VMID))!;
  expect(first.description).toContain(`qemurun-instance=${vmInstanceOf(first)}`);
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/stop`)).status).toBe(200);
  expect(await apiCall(h.api, 'POST', `/vm/${VMID}/set/cpu`, { cpu: 2 })).toEqual({ status: 200, json: 'ok' });
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/destroy`)).status).toBe(200);
  expect(await conf(VMID)).toBeUndefined();

  const before = await squatter(VMID, first.description!);
  expect(vmInstanceOf(parseVmConfig(before))).not.toBe(vmInstanceOf(first));
  for (const [path, body] of [
    [`/vm/${VMID}/set/cpu`, { cpu: 4 }],
    [`/vm/${VMID}/destroy`, undefined],
    [`/vm/${VMID}/rebuild`, {}],
  ] as const) {
    const res = await apiCall(h.api, 'POST', path, body);
    expect([path, res.status]).toEqual([path, 409]);
    expect(res.json.message).toMatch(COPIED);
  }
  expect(await reconcileItem('GET', VMID)).toMatchObject({ action: 'keep', reason: expect.stringMatching(COPIED) });
  expect(await reconcileItem('POST', VMID)).toMatchObject({ action: 'keep' });
  expect(await h.sandbox.readConfig(VMID)).toBe(before);

  // Its owner can still take it in, knowingly: an adoption seals it for its own uuid.
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/adopt`)).status).toBe(200);
  expect(await apiCall(h.api, 'POST', `/vm/${VMID}/set/cpu`, { cpu: 3 })).toEqual({ status: 200, json: 'ok' });
  expect((await conf(VMID))!.entries.cores).toBe('3');
});

test("a cancelled install's markers on a new foreign VM at its VMID do not get that VM removed by the reconciler", async () => {
  const VMID = 172;
  // Held at its first start, so the cancel finds it half-built, with its markers written.
  await h.sandbox.injectFault({ command: 'qm start', latencyMs: 3000, times: 1 });
  const res = await fetch(`${h.api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
    body: JSON.stringify({ os: 'debian', version: '12', id: VMID, name: 'cancelled' }),
  });
  expect(res.status).toBe(202);
  const { workflowId } = (await res.json()) as { workflowId: string };
  const description = await waitFor(
    'the install to write its markers',
    async () => {
      const text = (await conf(VMID))?.description;
      return text?.includes('qemurun-owner') ? text : undefined;
    },
    30_000,
  );
  expect((await apiCall(h.api, 'POST', `/vm/install/${workflowId}/cancel`)).status).toBe(202);
  await h.service.client.workflow.getHandle(workflowId).result().catch(() => undefined);
  expect((await h.service.client.workflow.getHandle(workflowId).describe()).status.name).toBe('CANCELLED');
  expect(await conf(VMID)).toBeUndefined();

  const before = await squatter(VMID, description);
  expect(await reconcileItem('GET', VMID)).toMatchObject({ action: 'keep', reason: expect.stringMatching(COPIED) });
  const run = await apiCall(h.api, 'POST', '/reconcile');
  expect(run.json.removed).not.toContain(VMID);
  expect(await h.sandbox.readConfig(VMID)).toBe(before);
});

test('the upgrade: markers sealed without the instance count until the reseal pass, which binds them to the uuid and records it; then that form is refused', async () => {
  // The worker's pass at start found no VM and recorded it.
  const record = stateFiles(h.config.dataDir).markersResealed;
  expect(fs.readFileSync(record, 'utf8')).toMatch(/^markers sealed for their VM instance at \S+; VMs resealed: none\n$/);
  // A VM sealed by an earlier version (no instance line, the older sealed text), as if before the upgrade.
  const VMID = 173;
  const old = { vmid: VMID, owner: 'install-before-upgrade', run: 'run-0', spec: specMarkerValue({ os: 'debian', version: '12', vmid: VMID, cores: 1, ramMb: 512, diskGb: 4, user: 'debian' }) };
  const oldText = `team notes\n${installedDescription(old, markerSealFor(h.config).seal(old), 'more notes')}`;
  expect((await qm('create', String(VMID), '--name', 'before', '--description', oldText)).exitCode).toBe(0);
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/set/cpu`, { cpu: 2 })).json.message).toMatch(/form without the VM instance.*refuses since it resealed/);

  // As before the upgrade: no record yet, so the pass runs.
  fs.rmSync(record);
  const executors = createExecutors(h.config, { spawner: testSpawner(), mainNodeEnv: h.sandbox.envFor(h.config.mainNode) });
  const proxmox = connectCluster(h.config, executors);
  const warnings: string[] = [];
  try {
    expect(await resealLegacyMarkers(h.config, proxmox, (m) => warnings.push(m))).toMatchObject({ resealed: expect.arrayContaining([VMID]), recorded: true });
  } finally {
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await proxmox.close();
  }
  expect(warnings).toEqual([]);
  const after = (await conf(VMID))!;
  expect(after.description!.split('\n')).toEqual([...oldText.split('\n').slice(0, 4), `qemurun-instance=${vmInstanceOf(after)}`, expect.stringMatching(/^qemurun-seal=/), 'more notes']);
  expect(fs.readFileSync(record, 'utf8')).toMatch(new RegExp(`VMs resealed: (\\d+ )*${VMID}`));
  expect(await apiCall(h.api, 'POST', `/vm/${VMID}/set/cpu`, { cpu: 3 })).toEqual({ status: 200, json: 'ok' });
  // Copied now, the resealed markers are as worthless on another instance as an install's.
  expect((await qm('destroy', String(VMID))).exitCode).toBe(0);
  await squatter(VMID, after.description!);
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/destroy`)).json.message).toMatch(COPIED);
});
