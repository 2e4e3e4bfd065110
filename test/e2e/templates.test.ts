import { execa } from 'execa';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { parseTemplateMarker, templateScheduleId, templateWorkflowId } from '../../contract';
import { startHarness, type Harness } from '../support/harness';
import { requestSse, type SseResponse } from '../support/sse';
import { apiCall } from '../support/api';
import { runInGuest } from '../support/guest';
import { onceInCliMode } from '../support/proxmoxMode';
import { activityAttempts } from '../support/history';

/**
 * Golden templates (issue 25) end to end on the sandbox, in CLI mode and (the api-mode pass,
 * without the 20-install burst, which proves the storage slots once) through Proxmox's REST API: a template built by its Temporal Schedule and on demand, cleaned
 * and converted with `qm template`; installs that clone it (linked, one storage lock at a
 * time per slot) and end with the seed's four final events; one whose explicit id another node
 * holds, refused as a taken VMID; 20 of them at once; `source`
 * choosing the path; an old template retired once its linked clones are gone.
 */

let h: Harness;
const MINUTES = 60_000;

beforeAll(async () => {
  // `local` (a directory storage) takes disk images here, as an operator enables them: its
  // linked clones are qcow2 files standing on the template's base volume.
  h = await startHarness({ TEMPLATES: 'debian-12', TEMPLATE_SCHEDULE: '0 3 * * *' }, { storageContent: { local: ['backup', 'images', 'import', 'iso', 'vztmpl'] } });
}, 5 * MINUTES);

afterAll(async () => {
  await h?.stop();
});

const get = (p: string) => apiCall(h.api, 'GET', p);
const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);

interface TemplateEntry {
  vmid: number;
  name: string;
  os: string;
  version: string;
  storage: string;
  state: string;
  builtAt: string;
}

async function templates(): Promise<TemplateEntry[]> {
  const res = await get('/templates');
  expect(res.status).toBe(200);
  return (res.json as { templates: TemplateEntry[] }).templates;
}

async function vmConfig(vmid: number) {
  const text = await h.sandbox.readConfig(vmid);
  return text === undefined ? undefined : parseVmConfig(text);
}

/** Follows a workflow's events to their end. */
async function follow(workflowId: string): Promise<SseResponse> {
  return requestSse(`${h.api}/workflows/${encodeURIComponent(workflowId)}/events`, { timeoutMs: 10 * MINUTES });
}

function expectNoErrors(res: SseResponse): void {
  expect(res.events.filter((e) => e.status === 'error').map((e) => `${e.step}: ${e.message}`)).toEqual([]);
}

/** The seed's four final events, and the VM they name. */
function finalFour(res: SseResponse): { vmid: number; ip: string; user: string } {
  const last = res.events.slice(-4);
  expect(last.map((e) => [e.step, e.status])).toEqual(Array(4).fill(['VM initialization > finalizing', 'success']));
  expect(last[0].message).toMatch(/^\[\+\] VM installation completed in \d+\.\d{2}s$/);
  const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(last[1].message)?.[1]);
  expect(last[2].message).toBe(`[*] IP: 127.0.0.${vmid}`);
  const user = /^\[\*\] User: (\S+)$/.exec(last[3].message)?.[1] ?? '';
  return { vmid, ip: `127.0.0.${vmid}`, user };
}

const install = (body: Record<string, unknown>) => requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ...body }, timeoutMs: 10 * MINUTES });

let firstTemplate: number;

test('an install asking for a template when there is none fails before creating anything, and says how to make one', async () => {
  const vmids = async () => ((await get('/vm/list')).json as { list: Array<{ vmid: number }> }).list.map((v) => v.vmid);
  const before = await vmids();
  const res = await install({ source: 'template', name: 'none' });
  const last = res.events.at(-1)!;
  expect(last.status).toBe('error');
  expect(last.step).toBe('preparation > template');
  expect(last.message).toMatch(/source "template": no template of debian 12 on storage \S+ \(build one with POST \/api\/templates\)/);
  expect(await vmids()).toEqual(before);
});

test('bad template requests and sources are 400s naming the field', async () => {
  const bad = await post('/templates', { os: 'debian', version: '99' });
  expect(bad.status).toBe(400);
  expect(JSON.stringify(bad.json)).toMatch(/version: version must be one of 11, 12, 13 for debian/);
  const extra = await post('/templates', { os: 'debian', version: '12', ram: 4096 });
  expect(extra.status).toBe(400);
  expect(JSON.stringify(extra.json)).toMatch(/ram/);
  // A storage the main node lacks is refused as an install's `storage` is, and builds nothing.
  const storage = await post('/templates', { os: 'debian', version: '11', storage: 'nope' });
  expect([storage.status, (storage.json as { message: string }).message]).toEqual([400, expect.stringMatching(/storage: storage 'nope' does not exist on node 'pve1'$/)]);
  const id = templateWorkflowId({ os: 'debian', version: '11', storage: 'nope' });
  expect(await h.service.client.workflow.getHandle(id).describe().then(() => 'started', () => 'none')).toBe('none');
  const source = await post('/vm/install', { os: 'debian', version: '12', source: 'golden' });
  expect(source.status).toBe(400);
  expect((source.json as { message: string }).message).toMatch(/source: must be "template" or "image"/);
});

test(
  'the TEMPLATES schedule builds the template: image, shared init script, cleaned, shut down, qm template, sealed and listed',
  async () => {
    const schedules = (await get('/templates')).json as { schedules: Array<{ target: string; scheduleId: string; cron: string }> };
    expect(schedules.schedules).toEqual([{ target: 'debian-12', scheduleId: 'template-debian-12', cron: '0 3 * * *' }]);
    const handle = h.service.client.schedule.getHandle(templateScheduleId({ os: 'debian', version: '12' }));
    const described = await handle.describe();
    expect(described.action.type === 'startWorkflow' && described.action.workflowType).toBe('buildTemplate');

    // The night comes now: the schedule's own action, as Temporal runs it at 03:00.
    await handle.trigger();
    let runId: string | undefined;
    const deadline = Date.now() + MINUTES;
    while (!runId && Date.now() < deadline) {
      const d = await handle.describe();
      runId = d.info.recentActions.at(-1)?.action.workflow.workflowId;
      if (!runId) await new Promise((r) => setTimeout(r, 500));
    }
    expect(runId).toMatch(/^template-debian-12-/);
    const res = await follow(runId!);
    expectNoErrors(res);
    const steps = [...new Set(res.events.map((e) => e.step))];
    expect(steps).toEqual(
      expect.arrayContaining(['OS preparation > download', 'VM creation > qm create', 'VM initialization > init script', 'template > clean for cloning', 'template > shutdown', 'template > qm template']),
    );
    const done = res.events.at(-1)!;
    expect(done.message).toMatch(/^\[\+\] template tpl-debian-12-(\d+) \(VMID \1\) built in \d+\.\d{2}s$/);
    firstTemplate = Number(/VMID (\d+)/.exec(done.message)![1]);

    const conf = (await vmConfig(firstTemplate))!;
    expect(conf.entries.template).toBe('1');
    // Each clone gets its own cloud-init drive, on the bus its machine type needs.
    expect(conf.disks.map((d) => d.key)).toEqual(['scsi0']);
    expect(conf.disks[0].volid).toMatch(/base-\d+-disk-0/);
    const check = markerSealFor(h.config).check(conf, firstTemplate);
    expect(check.sealed).toBe(true);
    const marker = check.sealed ? parseTemplateMarker(check.fields.template) : undefined;
    expect(marker).toMatchObject({ os: 'debian', version: '12', storage: h.config.storage });

    // A template is no VM to rebuild: its own workflow makes the next one.
    const rebuild = await post(`/vm/${firstTemplate}/rebuild`, {});
    expect(rebuild.status).toBe(409);
    expect((rebuild.json as { message: string }).message).toMatch(/is a template: build a new one with POST \/api\/templates/);

    const listed = await templates();
    expect(listed).toEqual([expect.objectContaining({ vmid: firstTemplate, name: `tpl-debian-12-${firstTemplate}`, state: 'current', os: 'debian', version: '12' })]);
  },
  15 * MINUTES,
);

test(
  'an install whose clone meets its explicit id on another node fails at once as a taken VMID, and leaves that VM alone',
  async () => {
    // clone_vm looks for the new config on its own node only; pmxcfs refuses it at the rename.
    const vmid = 249;
    const env = { ...process.env, ...h.sandbox.envFor('pve2') };
    expect((await execa('qm', ['create', String(vmid), '--name', 'elsewhere'], { env, reject: false })).exitCode).toBe(0);
    try {
      const before = await h.sandbox.readConfig(vmid);
      const res = await install({ name: 'clash', id: vmid });
      const last = res.events.at(-1)!;
      expect(last.status).toBe('error');
      expect(last.message).toContain(`close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/${vmid}.conf' failed: File exists`);
      // A VmidTakenError: not retried, and an explicit id is not replaced by another.
      expect((await activityAttempts(h.service.client, res.headers['x-workflow-id'] as string)).cloneVm).toBe(1);
      expect(res.events.some((e) => /picking another/.test(e.message))).toBe(false);
      expect(await h.sandbox.readConfig(vmid)).toBe(before);
    } finally {
      await execa('qm', ['destroy', String(vmid)], { env, reject: false });
    }
  },
  5 * MINUTES,
);

test(
  'an install clones the template (no image, the per-VM init script only, no reboot); source "image" still builds from the image; both end with the four final events',
  async () => {
    const [cloned, imaged] = await Promise.all([install({ name: 'fast' }), install({ name: 'slow', source: 'image' })]);
    expectNoErrors(cloned);
    expectNoErrors(imaged);

    const clonedSteps = new Set(cloned.events.map((e) => e.step));
    expect(cloned.events.find((e) => e.step === 'preparation > template' && e.message.includes('installing as a'))?.message).toMatch(
      new RegExp(`installing as a linked clone of template tpl-debian-12-${firstTemplate} \\(VMID ${firstTemplate}, built `),
    );
    expect(clonedSteps.has('VM creation > qm clone')).toBe(true);
    expect(clonedSteps.has('OS preparation > download')).toBe(false);
    expect(clonedSteps.has('VM creation > import disk')).toBe(false);
    expect(clonedSteps.has('VM initialization > reboot')).toBe(false);
    const vm = finalFour(cloned);
    expect(vm.user).toBe('debian');
    const conf = (await vmConfig(vm.vmid))!;
    expect(conf.name).toBe(`fast-${vm.vmid}`);
    // On LVM-thin a linked clone is a thin snapshot of the base volume, named as any disk of the VM.
    expect(conf.disks.find((d) => d.key === 'scsi0')?.volid).toBe(`local-lvm:vm-${vm.vmid}-disk-0`);
    expect(conf.entries.ide2).toMatch(new RegExp(`^local-lvm:vm-${vm.vmid}-cloudinit`));
    expect(markerSealFor(h.config).check(conf, vm.vmid)).toMatchObject({ sealed: true, fields: { owner: expect.stringMatching(/^install-/) } });
    // The guest answers with the caller's key and its own host identity.
    expect(await runInGuest(vm.ip, h.config.vmSshPort, vm.user, h.key.privateKey, 'test -s /var/lib/qemurun/init-done')).toBe(0);

    const imagedSteps = new Set(imaged.events.map((e) => e.step));
    expect(imaged.events.some((e) => e.message.includes('building from the cloud image, as asked (source "image")'))).toBe(true);
    for (const s of ['OS preparation > download', 'VM creation > qm create', 'VM creation > import disk', 'VM initialization > reboot']) expect(imagedSteps.has(s)).toBe(true);
    finalFour(imaged);
  },
  15 * MINUTES,
);

onceInCliMode(
  '20 template installs at once all succeed: the clones take turns on the storage lock instead of timing out',
  async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => install({ name: `burst${i}` })));
    for (const res of results) expectNoErrors(res);
    const vms = results.map(finalFour);
    expect(new Set(vms.map((v) => v.vmid)).size).toBe(20);
    for (const res of results) expect(res.events.some((e) => e.step === 'VM creation > qm clone')).toBe(true);
    // Their VMIDs are wanted by the tests after this one.
    for (const v of vms) {
      expect((await post(`/vm/${v.vmid}/stop`)).status).toBe(200);
      expect((await post(`/vm/${v.vmid}/destroy`)).status).toBe(200);
    }
  },
  30 * MINUTES,
);

test(
  'on a directory storage an old template stays while a linked clone stands on it, and the build after the clone is gone retires it',
  async () => {
    const build = async () => {
      const started = await post('/templates', { os: 'debian', version: '12', storage: 'local' });
      expect(started.status).toBe(202);
      const { workflowId, events } = started.json as { workflowId: string; events: string };
      expect(workflowId).toBe('template-debian-12-on-local');
      expect(events).toBe('/api/workflows/template-debian-12-on-local/events');
      const res = await follow(workflowId);
      expectNoErrors(res);
      return { res, vmid: Number(/VMID (\d+)/.exec(res.events.at(-1)!.message)![1]) };
    };
    const onLocal = async () => (await templates()).filter((t) => t.storage === 'local').map((t) => [t.vmid, t.state]);

    const first = await build();
    const clone = await install({ name: 'onlocal', storage: 'local' });
    expectNoErrors(clone);
    const vm = finalFour(clone);
    // qcow2 on the template's base volume: the clone depends on it.
    expect((await vmConfig(vm.vmid))!.disks.find((d) => d.key === 'scsi0')?.volid).toMatch(new RegExp(`^local:${first.vmid}/base-${first.vmid}-disk-0\\.\\w+/${vm.vmid}/vm-${vm.vmid}-disk-0\\.qcow2$`));

    const second = await build();
    expect(second.res.events.some((e) => e.step === 'template > retire' && e.message.includes(`kept VM ${first.vmid}: linked clones still use them`))).toBe(true);
    expect(await onLocal()).toEqual([
      [second.vmid, 'current'],
      [first.vmid, 'retired'],
    ]);

    expect((await post(`/vm/${vm.vmid}/stop`)).status).toBe(200);
    expect((await post(`/vm/${vm.vmid}/destroy`)).status).toBe(200);
    const third = await build();
    const removed = third.res.events.find((e) => e.step === 'template > retire' && e.message.includes('removed'))?.message ?? '';
    expect(removed).toContain(`VM ${first.vmid}`);
    expect(removed).toContain(`VM ${second.vmid}`);
    expect(await vmConfig(first.vmid)).toBeUndefined();
    expect(await onLocal()).toEqual([[third.vmid, 'current']]);
    // The schedule's template on local-lvm is another target's: untouched.
    expect((await templates()).some((t) => t.vmid === firstTemplate && t.state === 'current')).toBe(true);
  },
  30 * MINUTES,
);
