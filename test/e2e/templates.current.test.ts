import { execa } from 'execa';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { startHarness, type Harness } from '../support/harness';
import { requestSse, type SseResponse } from '../support/sse';
import { apiCall } from '../support/api';
import { injectFaultOn, operationsMark, operationsOn } from '../support/proxmoxCalls';

/**
 * When a golden template is current, on the sandbox (CLI mode; `TEST_PROXMOX_MODE=api`
 * runs the file through the REST API): from the moment its build ends, although
 * /cluster/resources reports `template: 1` a pvestatd cycle later; and only once its
 * disks are base volumes, although Proxmox writes `template: 1` before it converts them
 * and `qm template` exits 0 when that fails. A conversion that fails is retried (a storage
 * lock's timeout is retryable); a build whose conversion keeps failing fails, and the
 * template before it stays current.
 */

let h: Harness;
const MINUTES = 60_000;
const LOCK_TIMEOUT = "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout";

beforeAll(async () => {
  // pvestatd's cycle, made 30 s: a template is still `template: 0` in /cluster/resources
  // for longer than an install takes to look for it once the build has ended.
  h = await startHarness({ SANDBOX_STATUS_LAG_MS: '30000' });
}, 5 * MINUTES);

afterAll(async () => {
  await h?.stop();
});

afterEach(async () => {
  await h.sandbox.clearFaults();
});

interface TemplateEntry {
  vmid: number;
  name: string;
  state: string;
}

async function templates(): Promise<Array<[number, string]>> {
  const res = await apiCall(h.api, 'GET', '/templates');
  expect(res.status).toBe(200);
  return (res.json as { templates: TemplateEntry[] }).templates.map((t) => [t.vmid, t.state]);
}

async function vmConfig(vmid: number) {
  const text = await h.sandbox.readConfig(vmid);
  return text === undefined ? undefined : parseVmConfig(text);
}

/** What /cluster/resources says of a VM: pvestatd's last report. */
async function resource(vmid: number): Promise<{ template?: number } | undefined> {
  const out = await execa('pvesh', ['get', '/cluster/resources', '--type', 'vm', '--output-format', 'json'], { env: h.sandbox.envFor(h.sandbox.mainNode) });
  return (JSON.parse(out.stdout) as Array<{ vmid: number; template?: number }>).find((v) => v.vmid === vmid);
}

/** Builds the debian 12 template on demand and follows its events to the last one. */
async function build(): Promise<SseResponse> {
  const started = await apiCall(h.api, 'POST', '/templates', { os: 'debian', version: '12' });
  expect(started.status).toBe(202);
  const { events } = started.json as { events: string };
  return requestSse(`${h.api}${events.replace(/^\/api/, '')}`, { timeoutMs: 10 * MINUTES });
}

const errors = (res: SseResponse) => res.events.filter((e) => e.status === 'error').map((e) => `${e.step}: ${e.message}`);
const builtVmid = (res: SseResponse) => Number(/\(VMID (\d+)\) built in/.exec(res.events.at(-1)!.message)?.[1]);
const install = (body: Record<string, unknown>) => requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ...body }, timeoutMs: 10 * MINUTES });

/** The template an install cloned, from its `preparation > template` event. */
function clonedFrom(res: SseResponse): number | undefined {
  const m = res.events.map((e) => /installing as a linked clone of template \S+ \(VMID (\d+)/.exec(e.message)).find(Boolean);
  return m ? Number(m[1]) : undefined;
}

let current: number;

test(
  'an install with source "template" issued the moment a build ends is a linked clone of that template',
  async () => {
    const built = await build();
    expect(errors(built)).toEqual([]);
    current = builtVmid(built);
    const [res, reported] = await Promise.all([install({ source: 'template', name: 'right-after' }), resource(current)]);
    // pvestatd has not reported the conversion yet: only the template's config says it.
    expect(reported?.template ?? 0).toBe(0);
    expect(errors(res)).toEqual([]);
    expect(clonedFrom(res)).toBe(current);
    const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);
    expect((await vmConfig(vmid))!.disks.find((d) => d.key === 'scsi0')?.volid).toBe(`local-lvm:vm-${vmid}-disk-0`);
    expect(await templates()).toEqual([[current, 'current']]);
  },
  15 * MINUTES,
);

test(
  'a conversion that fails after `template: 1` was written is retried, and the template is current only with its disk a base volume',
  async () => {
    const mark = await operationsMark(h);
    // qm template exits 0 (CLI) or its task fails (API), `template: 1` written, the disk not converted.
    await injectFaultOn(h, { op: 'template' }, { at: 'create_base', stderr: LOCK_TIMEOUT, times: 1 });
    const built = await build();
    expect(errors(built)).toEqual([]);
    const vmid = builtVmid(built);
    const conf = (await vmConfig(vmid))!;
    expect(conf.entries.template).toBe('1');
    expect(conf.disks.map((d) => [d.key, d.volid])).toEqual([['scsi0', `local-lvm:base-${vmid}-disk-0`]]);
    // The conversion, then the retry converting the disk it left.
    expect((await operationsOn(h, 'template', vmid, mark)).map((o) => o.params.disk)).toEqual([undefined, 'scsi0']);
    expect(await templates()).toEqual([[vmid, 'current']]);
    expect(await vmConfig(current)).toBeUndefined();
    current = vmid;
    const res = await install({ source: 'template', name: 'after-retry' });
    expect(errors(res)).toEqual([]);
    expect(clonedFrom(res)).toBe(vmid);
  },
  15 * MINUTES,
);

test(
  'a build whose conversion keeps failing fails; its VM is never a current template and goes, and the template before it stays current',
  async () => {
    await injectFaultOn(h, { op: 'template' }, { at: 'create_base', stderr: LOCK_TIMEOUT });
    const built = await build();
    const last = built.events.at(-1)!;
    expect([last.step, last.status]).toEqual(['template > qm template', 'error']);
    expect(last.message).toContain(LOCK_TIMEOUT);
    const failed = Number(built.events.map((e) => /VMID (\d+), IP /.exec(e.message)).find(Boolean)?.[1]);
    expect(failed).toBeGreaterThan(0);
    expect(failed).not.toBe(current);
    await h.sandbox.clearFaults();
    // Nothing retired: the template before is still there, and current.
    expect(await templates()).toEqual([[current, 'current']]);
    expect((await vmConfig(current))!.disks.find((d) => d.key === 'scsi0')?.volid).toBe(`local-lvm:base-${current}-disk-0`);
    // The build removed its half-converted VM.
    expect(await vmConfig(failed)).toBeUndefined();
    const res = await install({ source: 'template', name: 'after-failure' });
    expect(errors(res)).toEqual([]);
    expect(clonedFrom(res)).toBe(current);
  },
  15 * MINUTES,
);
