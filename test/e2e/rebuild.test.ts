import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { WorkflowFailedError } from '@temporalio/client';
import { installedDescription, type InstallSpec, ownerOf, specMarkerValue, specOf, VM_ID, VM_NAME, VM_NODE, VM_OPERATION, VM_OS } from '../../contract';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { vmInstanceOf } from '../../lib/proxmox/vmInstance';
import { stateFiles } from '../../lib/stateFiles';
import { vmProcess } from '../../sandbox/state/runtime';
import { vmRebuild } from '../../workflows';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';
import { apiCall } from '../support/api';
import { cipasswordMatches, runInGuest, userKeyPair } from '../support/guest';
import { injectFaultOn, isMutating, operations, operationsMark } from '../support/proxmoxCalls';
import { onceInCliMode } from '../support/proxmoxMode';
import { waitFor } from '../../sandbox/testkit';

/**
 * `POST /api/vm/:id/rebuild` and the vmRebuild workflow end to end: real Temporal, the
 * sandbox cluster, real SSH into the guests. The tests run in order and share the VMs.
 */

let h: Harness;
const VMID = 131;
const userKey = userKeyPair('owner@laptop');
const NETWORK = { bridge: 'vmbr1', vlan: 42, mtu: 1400, dns: { servers: ['192.0.2.53', '2001:db8::53'], search: 'lab.example' } };
const NETWORK_LINES = [
  /^net0: virtio=BC:24:11(:[0-9A-F]{2}){3},bridge=vmbr1,mtu=1400,tag=42$/m,
  /^nameserver: 192\.0\.2\.53 2001:db8::53$/m,
  /^searchdomain: lab\.example$/m,
];

beforeAll(async () => {
  h = await startHarness({}, { bridges: { pve1: ['vmbr0', 'vmbr1'], pve2: ['vmbr0', 'vmbr1'] } });
  // The network fields too: the rebuild must keep them from the spec marker.
  const res = await requestSse(`${h.api}/vm/install`, {
    body: { os: 'debian', version: '12', id: VMID, name: 'web', cpu: 2, ram: 1024, disk: '20G', pubkey: userKey.publicKey, ...NETWORK },
  });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
});

afterAll(async () => {
  await h?.stop();
});

const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);

/** Runs a command in the guest as `user` with the request's key; its exit code. */
const inGuest = (vmid: number, command: string, user = 'debian', key: Buffer = userKey.privateKey) =>
  runInGuest(`127.0.0.${vmid}`, h.config.vmSshPort, user, key, command);

/**
 * Whether a workflow with this id started at or after `t0`. Workflow ids are namespace-wide
 * and the dev server serves every test file of the run, so an older `vm-150` may exist.
 */
async function startedSince(workflowId: string, t0: Date): Promise<boolean> {
  const d = await h.service.client.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => undefined);
  return d !== undefined && d.startTime >= t0;
}

function qm(args: string[]) {
  return execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor('pve1') } });
}

function expectRebuilt(res: SseResponse, vmid: number) {
  expect(res.status).toBe(200);
  expect(res.headers['x-workflow-id']).toBe(`vm-${vmid}`);
  expect(res.events[0].message).toBe(`[*] workflow id: vm-${vmid}`);
  expect(res.closed).toBe(true);
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.map((e) => e.id)).toEqual(res.events.map((_, i) => i + 1));
  const last = res.events.slice(-4);
  expect(last.map((e) => e.step)).toEqual(Array(4).fill('VM rebuild > finalizing'));
  expect(last[0].message).toMatch(/^\[\+\] VM rebuild completed in \d+\.\d{2}s$/);
  expect(last.slice(1).map((e) => e.message)).toEqual([`[*] VMID: ${vmid}`, `[*] IP: 127.0.0.${vmid}`, '[*] User: debian']);
}

describe('rebuild through the API', () => {
  test('re-creates the VM from its recorded spec: new boot, same VMID, IP, name, size and keys', async () => {
    expect(await inGuest(VMID, 'echo before > ~/marker')).toBe(0);
    expect(await inGuest(VMID, 'test -e ~/marker')).toBe(0);
    const confBefore = (await h.sandbox.readConfig(VMID))!;
    const procBefore = vmProcess(h.sandbox.dir, VMID);
    expect(procBefore).toBeDefined();

    const res = await requestSse(`${h.api}/vm/${VMID}/rebuild`, { body: { passwd: 'n3w-Passw0rd' } });
    expectRebuilt(res, VMID);
    const steps = res.events.map((e) => e.step);
    // Its own steps in order, then the install child's, relayed live into this stream.
    const order = ['VM rebuild > check', 'VM rebuild > stop', 'VM rebuild > destroy', 'VM rebuild > install', 'VM creation > qm create', 'VM creation > import disk', 'VM initialization > init script', 'VM rebuild > finalizing'];
    const firsts = order.map((s) => steps.indexOf(s));
    expect(firsts.every((i) => i >= 0)).toBe(true);
    expect([...firsts].sort((a, b) => a - b)).toEqual(firsts);
    expect(res.events.some((e) => e.message.startsWith('[+] VM installation completed in'))).toBe(true);

    // A new VM process and a fresh guest root: the file written before is gone.
    const procAfter = vmProcess(h.sandbox.dir, VMID);
    expect(procAfter).toBeDefined();
    expect(procAfter!.startedAt).toBeGreaterThan(procBefore!.startedAt);
    expect(await inGuest(VMID, 'test -e ~/marker')).not.toBe(0);
    // The recorded key (and the main node's) still log in; another key does not.
    expect(await inGuest(VMID, 'true', 'debian', h.key.privateKey)).toBe(0);
    const stranger = userKeyPair('stranger').privateKey;
    await expect(inGuest(VMID, 'true', 'debian', stranger)).rejects.toThrow();

    const confAfter = (await h.sandbox.readConfig(VMID))!;
    for (const line of [/^name: web-131$/m, /^cores: 2$/m, /^memory: 1024$/m, /^scsi0: .*size=20G/m, /^ipconfig0: ip=127\.0\.0\.131\/24,gw=127\.0\.0\.1$/m, /^tags: debian$/m, ...NETWORK_LINES]) {
      expect(confBefore).toMatch(line);
      expect(confAfter).toMatch(line);
    }
    // The new VM belongs to the install child of this rebuild, and records the same spec.
    const descOf = (conf: string) => parseVmConfig(conf).description;
    const ownerAfter = ownerOf(descOf(confAfter));
    expect(ownerAfter).toMatch(/^vm-131-install-[0-9a-f]{8}$/);
    expect(ownerOf(descOf(confBefore))).toMatch(/^install-/);
    const { vmid: _ignored, ...specBefore } = specOf(descOf(confBefore))!;
    expect(specOf(descOf(confAfter))).toMatchObject(specBefore);
    expect(specOf(descOf(confAfter))).toMatchObject(NETWORK);
    // The DNS reaches the guest's network-config as qemu-server writes it (nocloud_network).
    const network = (await qm(['cloudinit', 'dump', String(VMID), 'network'])).stdout;
    expect(network).toContain("    - type: nameserver\n      address:\n      - '192.0.2.53'\n      - '2001:db8::53'\n      search:\n      - 'lab.example'");
    // The password of the request, not the default, went to cloud-init.
    expect(cipasswordMatches(confAfter, 'n3w-Passw0rd')).toBe(true);
    // The install named no passwd: cloud-init got none (keys only), not a well-known default.
    expect(confBefore).not.toMatch(/^cipassword:/m);
  });

  onceInCliMode('the workflow carries the install search attributes, with VmOperation=rebuild', async () => {
    const d = await h.service.client.workflow.getHandle(`vm-${VMID}`).describe();
    expect(d.type).toBe('vmRebuild');
    expect(d.status.name).toBe('COMPLETED');
    const sa = d.typedSearchAttributes;
    expect(sa.get(VM_ID)).toBe(VMID);
    expect(sa.get(VM_OPERATION)).toBe('rebuild');
    expect(sa.get(VM_OS)).toBe('debian-12');
    expect(sa.get(VM_NODE)).toBe('pve1');
    expect(sa.get(VM_NAME)).toBe('web-131');
    const result = await h.service.client.workflow.getHandle(`vm-${VMID}`).result();
    expect(result).toMatchObject({ vmid: VMID, ip: '127.0.0.131', user: 'debian', name: 'web-131', node: 'pve1' });
    expect(result.installWorkflowId).toMatch(/^vm-131-install-/);
  });

  onceInCliMode('a second operation while a rebuild runs is 409 naming it; the first one finishes', async () => {
    const first = await requestSse(`${h.api}/vm/${VMID}/rebuild`, { body: {}, stopAfter: 3 });
    expect(first.status).toBe(200);
    const second = await post(`/vm/${VMID}/rebuild`, {});
    expect(second.status).toBe(409);
    expect(second.json).toMatchObject({ success: false, workflowId: `vm-${VMID}`, operation: 'vmRebuild' });
    expect(second.json.message).toMatch(/vmRebuild/);
    // Re-attach to the first and follow it to its end.
    const rest = await requestSse(`${h.api}/workflows/vm-${VMID}/events`, { headers: { 'Last-Event-ID': '3' } });
    expect(rest.closed).toBe(true);
    expect(rest.events.at(-4)!.message).toMatch(/^\[\+\] VM rebuild completed/);
    expect(await inGuest(VMID, 'true')).toBe(0);
    // A rebuild that names no passwd keeps the one the VM had (the last rebuild's), not a default.
    expect(cipasswordMatches((await h.sandbox.readConfig(VMID))!, 'n3w-Passw0rd')).toBe(true);
  });

  onceInCliMode('bad input is 400 and starts nothing', async () => {
    expect(await post(`/vm/abc/rebuild`, {})).toEqual({ status: 400, json: { success: false, message: 'please check your input: id: must be a positive integer VMID' } });
    const unknownField = await post(`/vm/${VMID}/rebuild`, { passwd: 'x', name: 'other' });
    expect(unknownField.status).toBe(400);
    expect(unknownField.json.message).toMatch(/^please check your input: unknown field\(s\): name/);
    const badPasswd = await post(`/vm/${VMID}/rebuild`, { passwd: 'a\nb' });
    expect(badPasswd.status).toBe(400);
    expect(badPasswd.json.message).toMatch(/passwd/);
  });

  onceInCliMode('a VMID that does not exist is 404', async () => {
    const t0 = new Date();
    const res = await post('/vm/199/rebuild', {});
    expect(res).toEqual({ status: 404, json: { success: false, message: 'VM 199 does not exist' } });
    expect(await startedSince('vm-199', t0)).toBe(false);
  });

  onceInCliMode('a VM sealed before the spec said `cores` (its marker says `cpu`) is rebuilt from that marker; the new one says `cores`', async () => {
    const desc = parseVmConfig((await h.sandbox.readConfig(VMID))!).description!;
    const owner = ownerOf(desc)!;
    const run = /^qemurun-run=(.*)$/m.exec(desc)![1];
    const { cores, ...rest } = specOf(desc)!;
    // The spec marker as earlier versions wrote it, sealed then: the seal covers it as written.
    const instance = vmInstanceOf(parseVmConfig((await h.sandbox.readConfig(VMID))!))!;
    const markers = { instance, owner, run, spec: Buffer.from(JSON.stringify({ ...rest, cpu: cores })).toString('base64url') };
    await qm(['set', String(VMID), '--description', installedDescription(markers, markerSealFor(h.config).seal({ vmid: VMID, ...markers }))]);

    const res = await requestSse(`${h.api}/vm/${VMID}/rebuild`, { body: {} });
    expectRebuilt(res, VMID);
    expect(res.events.map((e) => e.message)).toContainEqual(expect.stringMatching(new RegExp(`re-creating it as debian 12, ${cores} cores,`)));
    const conf = (await h.sandbox.readConfig(VMID))!;
    expect(conf).toMatch(new RegExp(`^cores: ${cores}$`, 'm'));
    const written = JSON.parse(Buffer.from(/^qemurun-spec=(.*)$/m.exec(parseVmConfig(conf).description!)![1], 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(written).toMatchObject({ cores });
    expect(written).not.toHaveProperty('cpu');
  });
});

describe('refusals destroy nothing', () => {
  test('a VM QemuRun did not install is refused with 409, and left alone', async () => {
    await qm(['create', '150', '--name', 'foreign']);
    const before = await h.sandbox.readConfig(150);
    const t0 = new Date();
    const res = await post('/vm/150/rebuild', {});
    expect(res.status).toBe(409);
    expect(res.json.message).toMatch(/VM 150 \(foreign\) was not installed by QemuRun.*qemurun-owner.*refusing to rebuild it/);
    expect(await h.sandbox.readConfig(150)).toBe(before);
    expect(await startedSince('vm-150', t0)).toBe(false);
  });

  onceInCliMode('the workflow\'s own check refuses it too (a schedule has no API in front of it)', async () => {
    const mark = await operationsMark(h);
    const handle = await h.service.client.workflow.start(vmRebuild, {
      taskQueue: h.config.temporal.taskQueue,
      workflowId: 'vm-150',
      // Issued as a scheduled run issues it: for its id, now, naming no instance.
      args: [{ vmid: 150, issuedAt: Date.now(), issuedFor: 'vm-150' }],
    });
    const err = await handle.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause?.message).toMatch(/not installed by QemuRun.*\(nothing was destroyed\)$/);
    const seen = await operations(h, mark);
    // It looked at the VM (so the check below is not vacuous), and changed nothing.
    expect(seen.some((o) => o.op === 'config' && o.vmid === 150 && o.ok)).toBe(true);
    expect(seen.filter(isMutating)).toEqual([]);
    expect(await h.sandbox.readConfig(150)).toMatch(/^name: foreign$/m);
    const page = await h.service.client.workflow.getHandle('vm-150').query('progress', 0) as { events: Array<{ step: string; status: string; message: string }> };
    expect(page.events.at(-1)).toMatchObject({ step: 'VM rebuild > check', status: 'error' });
  });

  onceInCliMode('a disabled VM is refused with 400, and left alone', async () => {
    const file = stateFiles(h.config.dataDir).disabled;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${VMID}:web\n`);
    try {
      const before = vmProcess(h.sandbox.dir, VMID);
      const res = await post(`/vm/${VMID}/rebuild`, {});
      expect(res.status).toBe(400);
      expect(res.json.message).toMatch(new RegExp(`VM ${VMID} is disabled`));
      expect(vmProcess(h.sandbox.dir, VMID)).toEqual(before);
      expect(await inGuest(VMID, 'true')).toBe(0);
    } finally {
      fs.rmSync(file);
    }
  });

  onceInCliMode('a VM whose install is still running is refused with 409, and its install goes on', async () => {
    // Slow the install down after `qm create`, so the rebuild arrives while it builds the VM.
    await injectFaultOn(h, { op: 'start', vmid: 132 }, { latencyMs: 4000, times: 1 });
    const install = requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: 132, name: 'young' } });
    // Until the create has written the markers: in API mode the config exists first with only
    // `lock: create` (qemu-server's create_and_lock_config), as on Proxmox.
    await waitFor('the install to write its markers', async () => (await h.sandbox.readConfig(132))?.includes('qemurun-owner'), 10_000);
    const res = await post('/vm/132/rebuild', {});
    expect(res.status).toBe(409);
    expect(res.json.message).toMatch(/^VM 132 \(young-132\) is still being built by installVm \(workflow install-.*\); try again when it has finished$/);
    const done = await install;
    expect(done.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(done.events.at(-3)!.message).toBe('[*] VMID: 132');
  });

  onceInCliMode('a VM with a sealed owner marker but no spec marker is refused: there is nothing to rebuild it from', async () => {
    const markers = { vmid: 151, instance: crypto.randomUUID(), owner: 'install-by-hand', run: 'r1' };
    const description = `qemurun-owner=${markers.owner}\nqemurun-run=${markers.run}\nqemurun-instance=${markers.instance}\nqemurun-seal=${markerSealFor(h.config).seal(markers)}`;
    await qm(['create', '151', '--name', 'half', '--description', description, '--smbios1', `uuid=${markers.instance}`]);
    const res = await post('/vm/151/rebuild', {});
    expect(res.status).toBe(409);
    expect(res.json.message).toMatch(/no readable qemurun-spec marker/);
    expect(await h.sandbox.readConfig(151)).toMatch(/^name: half$/m);
  });

  /** VMID's description, with its markers (as a Proxmox user with VM.Config.Options can) replaced. */
  async function withMarkers(description: string, run: () => Promise<void>) {
    const before = parseVmConfig((await h.sandbox.readConfig(VMID))!).description!;
    await qm(['set', String(VMID), '--description', description]);
    try {
      await run();
    } finally {
      await qm(['set', String(VMID), '--description', before]);
    }
  }

  test('markers edited by hand (qm set --description) are not trusted: the rebuild is refused, the VM untouched', async () => {
    const desc = parseVmConfig((await h.sandbox.readConfig(VMID))!).description!;
    const spec = specOf(desc)!;
    // The real owner and seal, with a spec that asks for more: what an editor of the Notes can write.
    const forged = desc.replace(/^qemurun-spec=.*$/m, `qemurun-spec=${specMarkerValue({ ...spec, cores: 8 })}`);
    // A VM of one's own made QemuRun's by copying another VM's markers.
    await qm(['create', '153', '--name', 'copycat', '--description', desc]);
    await withMarkers(forged, async () => {
      const t0 = new Date();
      const before = await h.sandbox.readConfig(VMID);
      const res = await post(`/vm/${VMID}/rebuild`, {});
      expect(res.status).toBe(409);
      expect(res.json.message).toMatch(/qemurun-owner marker is not trusted: its markers do not match their seal/);
      expect(await h.sandbox.readConfig(VMID)).toBe(before);
      expect(await startedSince(`vm-${VMID}`, t0)).toBe(false);
    });
    const copied = await post('/vm/153/rebuild', {});
    expect(copied.status).toBe(409);
    expect(copied.json.message).toMatch(/copied from another VM than 153/);
    expect(await h.sandbox.readConfig(153)).toMatch(/^name: copycat$/m);
  });

  test('a sealed spec past the bounds or the free space is refused on rebuild, before anything is touched', async () => {
    const desc = parseVmConfig((await h.sandbox.readConfig(VMID))!).description!;
    const owner = ownerOf(desc)!;
    const run = /^qemurun-run=(.*)$/m.exec(desc)![1];
    const instance = vmInstanceOf(parseVmConfig((await h.sandbox.readConfig(VMID))!))!;
    const sealedWith = (spec: InstallSpec) => {
      const markers = { instance, owner, run, spec: specMarkerValue(spec) };
      return installedDescription(markers, markerSealFor(h.config).seal({ vmid: VMID, ...markers }));
    };
    const spec = specOf(desc)!;
    for (const [diskGb, message] of [
      [100_000, /diskGb: .*refusing to rebuild/],
      [99_999, /disk: 99999G is more than the free space of storage '[^']+'.*refusing to rebuild/],
    ] as const) {
      await withMarkers(sealedWith({ ...spec, diskGb }), async () => {
        const mark = await operationsMark(h);
        const res = await post(`/vm/${VMID}/rebuild`, {});
        expect(res.status).toBe(400);
        expect(res.json.message).toMatch(message);
        expect((await operations(h, mark)).filter(isMutating)).toEqual([]);
      });
    }
    // The workflow's own check (a schedule's runs have no API in front of them) refuses it too.
    await withMarkers(sealedWith({ ...spec, diskGb: 99_999 }), async () => {
      const handle = await h.service.client.workflow.start(vmRebuild, { taskQueue: h.config.temporal.taskQueue, workflowId: `vm-${VMID}`, args: [{ vmid: VMID, issuedAt: Date.now(), issuedFor: `vm-${VMID}` }] });
      const err = await handle.result().then(() => undefined, (e: unknown) => e);
      expect((err as WorkflowFailedError).cause?.message).toMatch(/free space.*\(nothing was destroyed\)$/);
    });
  });
});
