import fs from 'node:fs';
import { execa } from 'execa';
import { utils } from 'ssh2';
import { fingerprint } from '../../lib/guestHostKey';
import { LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';
import { eventually, waitFor } from '../../sandbox/testkit';
import { activityAttempts as attemptsInHistory } from '../support/history';
import { startSquatter, type Squatter } from '../support/squatter';
import { injectFaultOn, isMutating, operations, operationsMark, type ProxmoxOperation } from '../support/proxmoxCalls';
import { apiMode, onceInCliMode } from '../support/proxmoxMode';

/**
 * The install workflow's promises beyond the happy path, on the real Temporal server and
 * the sandbox: retries, cleanup, migration, re-attaching, concurrency, cancellation,
 * idempotency, and finding runs by search attribute. Faults are injected on operations
 * (./support/proxmoxCalls), so the suite runs as written in CLI and in API mode.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});


function install(body: Record<string, unknown>, opts: Parameters<typeof requestSse>[1] = {}): Promise<SseResponse> {
  return requestSse(`${h.api}/vm/install`, { body, ...opts });
}

function vmidOf(res: SseResponse): number {
  const line = res.events.find((e) => /^\[\*\] VMID: \d+$/.test(e.message));
  if (!line) throw new Error(`no VMID event in: ${JSON.stringify(res.events.slice(-5))}`);
  return Number(line.message.split(': ')[1]);
}

async function vmIds(): Promise<number[]> {
  const { stdout } = await execa('pvesh', ['get', '/cluster/resources', '--type', 'vm', '--output-format', 'json'], {
    env: { ...process.env, ...h.sandbox.envFor('pve1') },
  });
  return (JSON.parse(stdout) as Array<{ vmid: number }>).map((r) => r.vmid).sort();
}

/** The fingerprint of the host key a sandbox guest's sshd serves. */
function guestKeyFingerprint(vmid: number): string {
  const key = utils.parseKey(fs.readFileSync(`${h.sandbox.dir}/guests/${vmid}/ssh_host_ed25519_key`, 'utf8'));
  if (key instanceof Error || Array.isArray(key)) throw new Error(`VM ${vmid}: unreadable host key`);
  return fingerprint(key.getPublicSSH());
}

/** Cleanup touched only what this install made: it destroyed exactly the VM it created. */
function expectOwnVmRemoved(ops: ProxmoxOperation[]): void {
  const created = ops.filter((o) => o.op === 'create' && o.ok).map((o) => o.vmid);
  expect(created).toHaveLength(1);
  expect(ops.filter((o) => o.op === 'destroy' && o.ok).map((o) => o.vmid)).toEqual(created);
}

/** Attempts of each activity type, from the real workflow history. */
const activityAttempts = (workflowId: string) => attemptsInHistory(h.service.client, workflowId);

onceInCliMode('node pve2: the VM is migrated there before its first boot, started there, and answers', async () => {
  const mark = await operationsMark(h);
  const res = await install({ os: 'debian', version: '12', node: 'pve2' });
  expect(res.events.at(-1)?.message).toMatch(/^\[\*\] User: debian$/);
  const vmid = vmidOf(res);
  // SSH was pinned to the key the guest made, as its agent read it through Proxmox.
  expect(res.events.map((e) => e.message)).toContain(`[*] host key ${guestKeyFingerprint(vmid)} (reported by the guest agent)`);
  expect(res.events.some((e) => e.step === 'VM initialization > migrate' && /migration finished successfully/.test(e.message))).toBe(true);
  // Created on the main node, moved while stopped, first started on pve2 (in CLI mode
  // through pve2's own sshd, in API mode on pve2's API path).
  const ops = (await operations(h, mark)).filter((o) => o.vmid === vmid && ['create', 'migrate', 'start'].includes(o.op));
  expect(ops.map(({ node, op, ok }) => ({ node, op, ok }))).toEqual([
    { node: 'pve1', op: 'create', ok: true },
    { node: 'pve1', op: 'migrate', ok: true },
    { node: 'pve2', op: 'start', ok: true },
  ]);
  expect(ops[1].params.target).toBe('pve2');
  const { stdout } = await execa('qm', ['status', String(vmid)], { env: { ...process.env, ...h.sandbox.envFor('pve2') } });
  expect(stdout).toBe('status: running');
});

test('a qm step locked twice is retried and the install succeeds; history shows the retries', async () => {
  await injectFaultOn(h, { op: 'create' }, { times: 2, stderr: 'VM is locked (create)', exitCode: 255 });
  const res = await install({ os: 'ubuntu', version: '22.04' });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-1)?.message).toBe('[*] User: ubuntu');
  const attempts = await activityAttempts(res.headers['x-workflow-id'] as string);
  expect(attempts.createVm).toBe(3);
  expect(attempts.importDisk).toBe(1);
});

test('a create that meets a held config lock times out as on Proxmox, is retried, and the install succeeds', async () => {
  const vmid = 237;
  const lock = h.sandbox.holdVmLock(vmid);
  const mark = await operationsMark(h);
  const pending = install({ os: 'debian', version: '12', id: vmid });
  try {
    // create_vm waits 1 s for the lock (qemu-server lock_config_full($vmid, 1, ...)).
    await eventually(async () => expect((await operations(h, mark)).filter((o) => o.op === 'create' && o.ok === false)).toHaveLength(1), 30_000);
  } finally {
    lock.release();
  }
  const res = await pending;
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(vmidOf(res)).toBe(vmid);
  expect((await operations(h, mark)).filter((o) => o.op === 'create').map((o) => o.ok)).toEqual([false, true]);
});

test('warnings are no failure: a start that ends with TASK WARNINGS and a cloud-init that reports errors, the install succeeds at once', async () => {
  const vmid = 239;
  await injectFaultOn(h, { op: 'start' }, { times: 1, warn: ['no efidisk configured! Using temporary efivars disk.'] });
  // `cloud-init status` says error (exit 1): a module failed, yet the user and keys took.
  h.sandbox.setGuestFault(vmid, { cloudInitStatus: 'error' });
  try {
    const mark = await operationsMark(h);
    const res = await install({ os: 'debian', version: '12', id: vmid });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    expect((await operations(h, mark)).filter((o) => o.op === 'start').map((o) => o.ok)).toEqual([true]);
    expect(res.events).toContainEqual(
      expect.objectContaining({ step: 'VM initialization > init script', message: '[!] cloud-init finished with errors (status: error); see /var/log/cloud-init.log on the VM' }),
    );
    // The wait came first: the init script ran once cloud-init had finished.
    const log = (await h.sandbox.guestLog(vmid)).split('\n');
    const waited = log.findIndex((l) => / cloud-init status --wait$/.test(l));
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(log.findIndex((l) => / sudo bash -s$/.test(l))).toBeGreaterThan(waited);
    // One attempt of the step's one activity: the errors cloud-init reported failed nothing.
    const attempts = await activityAttempts(res.headers['x-workflow-id'] as string);
    expect({ runInitScript: attempts.runInitScript, waitForCloudInit: attempts.waitForCloudInit }).toEqual({ runInitScript: 1, waitForCloudInit: undefined });
  } finally {
    h.sandbox.setGuestFault(vmid, undefined);
  }
});

test('an image that fails its checksum during the install is fetched again and the install succeeds', async () => {
  const img = h.images.image('debian', '11');
  h.images.corruptNext(img.path);
  const res = await install({ os: 'debian', version: '11' });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  // The corrupted copy was thrown away (ImageChecksumError is retried), not imported.
  expect(h.images.gets(img.path)).toBe(2);
});

onceInCliMode('an init script that exits non-zero is retried, then fails the install, which removes its VM', async () => {
  const vmid = 238;
  // The guest's apt-get fails as against a mirror that answers 503 (exit 100).
  h.sandbox.setGuestFault(vmid, { packageExitCode: 100 });
  try {
    const mark = await operationsMark(h);
    const res = await install({ os: 'debian', version: '12', id: vmid });
    const last = res.events.at(-1)!;
    expect([last.step, last.status]).toEqual(['VM initialization > init script', 'error']);
    expect(last.message).toMatch(/^\[-\] .*init script exited with code 100/);
    expect(res.events.some((e) => e.message === `[*] VM ${vmid} removed`)).toBe(true);
    expectOwnVmRemoved(await operations(h, mark));
    expect((await activityAttempts(res.headers['x-workflow-id'] as string)).runInitScript).toBe(3);
  } finally {
    h.sandbox.setGuestFault(vmid, undefined);
  }
});

onceInCliMode('a permanent failure after create removes the VM and ends with an error event naming the step', async () => {
  const before = await vmIds();
  await injectFaultOn(h, { op: 'resize' }, { times: 1, stderr: "disk 'scsi0' does not exist", exitCode: 0 });
  const mark = await operationsMark(h);
  const res = await install({ os: 'debian', version: '11' });
  const last = res.events.at(-1)!;
  expect(last.status).toBe('error');
  expect(last.step).toBe('VM initialization > cloud-init');
  expect(last.message).toMatch(/^\[-\] .*disk 'scsi0' does not exist/);
  expect(res.events.some((e) => /^\[\*\] VM \d+ removed$/.test(e.message))).toBe(true);
  expect(res.closed).toBe(true);
  expect(await vmIds()).toEqual(before);
  expectOwnVmRemoved(await operations(h, mark));
});

test('a bridge the main node lacks fails the install at its start step and leaves no VM', async () => {
  // The node loses vmbr0 (the VM_BRIDGE default): create takes the name, start fails, as on Proxmox.
  const file = `${h.sandbox.dir}/sandbox/cluster.json`;
  const saved = fs.readFileSync(file, 'utf8');
  const model = JSON.parse(saved) as { nodes: Array<{ name: string; bridges?: string[] }> };
  model.nodes.find((n) => n.name === 'pve1')!.bridges = ['vmbr1'];
  fs.writeFileSync(file, JSON.stringify(model));
  try {
    const before = await vmIds();
    const mark = await operationsMark(h);
    const res = await install({ os: 'debian', version: '12' });
    const last = res.events.at(-1)!;
    expect(last.status).toBe('error');
    expect(last.step).toBe('VM initialization > start');
    // Proxmox VE 9 checks a VirtIO NIC's bridge before QEMU runs (8.4: QEMU's ifup script, then `start failed`).
    expect(last.message).toMatch(/^\[-\] .*bridge 'vmbr0' does not exist/);
    expect(res.events.some((e) => /^\[\*\] VM \d+ removed$/.test(e.message))).toBe(true);
    expect(await vmIds()).toEqual(before);
    expect(last.message).toMatch(/to fix: set VM_BRIDGE to a bridge node 'pve1' has, or create 'vmbr0' there/);
    const ops = await operations(h, mark);
    // Not retried: the node's network does not heal by itself (BridgeNotFoundError).
    expect(ops.filter((o) => o.op === 'start' && !o.ok)).toHaveLength(1);
    expectOwnVmRemoved(ops);
  } finally {
    fs.writeFileSync(file, saved);
  }
});

test('a bridge the node the VM would start on lacks is a 400 naming it, before anything starts', async () => {
  const before = await vmIds();
  for (const [fields, node] of [[{}, 'pve1'], [{ node: 'pve2' }, 'pve2']] as const) {
    const res = await install({ os: 'debian', version: '12', bridge: 'vmbr7', ...fields });
    expect(res.status).toBe(400);
    // In API mode the node's list is what the token may see (proxmoxApi.e2e shows a bridge it may not).
    expect(JSON.parse(res.body).message).toBe(
      apiMode
        ? `please check your input: bridge: node '${node}' lists no bridge 'vmbr7' to the Proxmox token (it lists vmbr0): the node lacks it, or the token lacks SDN.Use on /sdn/zones/localnetwork/vmbr7, without which Proxmox neither lists the bridge nor attaches a VM to it`
        : `please check your input: bridge: node '${node}' has no bridge 'vmbr7' (it has vmbr0)`,
    );
  }
  expect(await vmIds()).toEqual(before);
});

test.each([
  ['an mtu above the bridge\'s', { mtu: 9000 }, /MTU '9000' is bigger than the bridge MTU '1500'.*to fix: install with an `mtu` no larger than the bridge's MTU/],
])('%s from the request fails the start once, its hint naming the field, and leaves no VM', async (_name, fields, says) => {
  const before = await vmIds();
  const mark = await operationsMark(h);
  const res = await install({ os: 'debian', version: '12', ...fields });
  const last = res.events.at(-1)!;
  expect([last.status, last.step]).toEqual(['error', 'VM initialization > start']);
  expect(last.message).toMatch(says);
  expect(last.message).not.toMatch(/VM_BRIDGE/);
  expect(await vmIds()).toEqual(before);
  const ops = await operations(h, mark);
  expect(ops.filter((o) => o.op === 'start' && !o.ok)).toHaveLength(1);
  expectOwnVmRemoved(ops);
});

onceInCliMode('an explicit id that is taken fails clearly and leaves that VM alone', async () => {
  const first = await install({ os: 'debian', version: '12', id: 230 });
  expect(vmidOf(first)).toBe(230);
  const before = await h.sandbox.readConfig(230);
  const mark = await operationsMark(h);
  const res = await install({ os: 'debian', version: '12', id: 230 });
  const last = res.events.at(-1)!;
  expect(last.status).toBe('error');
  expect(last.message).toMatch(/VM 230 already exists on node 'pve1'/);
  expect(await h.sandbox.readConfig(230)).toBe(before);
  // Its create was refused; nothing else was done to VM 230, and no clean-up went for it.
  const ops = (await operations(h, mark)).filter((o) => o.vmid === 230);
  expect(ops.filter((o) => o.op === 'create').map((o) => o.ok)).toEqual([false]);
  expect(ops.filter((o) => isMutating(o) && o.ok !== false)).toEqual([]);
});

describe('a machine squatting on the VM address gets nothing', () => {
  let squatter: Squatter | undefined;
  afterEach(async () => {
    await squatter?.close();
    squatter = undefined;
  });

  onceInCliMode('an explicit id whose address already answers SSH is refused before any VM is made', async () => {
    squatter = await startSquatter('127.0.0.231', h.config.vmSshPort);
    const mark = await operationsMark(h);
    const res = await install({ os: 'debian', version: '12', id: 231 });
    const last = res.events.at(-1)!;
    expect(last.status).toBe('error');
    expect(last.message).toMatch(/VM 231's address 127\.0\.0\.231 already answers SSH/);
    expect((await operations(h, mark)).filter((o) => o.vmid === 231 && o.op === 'create')).toEqual([]);
    expect({ authentications: squatter.authentications, commands: squatter.commands }).toEqual({ authentications: [], commands: [] });
  });

  test("one that takes the address after the check meets the guest agent's key and is refused before any login", async () => {
    let started: Promise<Squatter> | undefined;
    // The address is free when the VM is created; the squatter takes it before the VM boots.
    const res = await install(
      { os: 'debian', version: '12', id: 232 },
      { onEvent: (e) => void (e.step === 'VM creation > qm create' && /^\[\*\] VMID 232/.test(e.message) && (started ??= startSquatter('127.0.0.232', h.config.vmSshPort))) },
    );
    squatter = await started;
    const last = res.events.at(-1)!;
    expect(last.step).toBe('VM initialization > wait for SSH');
    expect(last.status).toBe('error');
    expect(last.message).toContain(`presented host key ${squatter!.fingerprint}, not the VM's`);
    expect(last.message).toContain("reported by VM 232's guest agent");
    // It answered, and got no login, no command, no byte of the init script.
    expect(squatter!.connections).toBeGreaterThan(0);
    expect({ authentications: squatter!.authentications, commands: squatter!.commands, received: squatter!.received }).toEqual({
      authentications: [],
      commands: [],
      received: '',
    });
    expect(await vmIds()).not.toContain(232);
  });
});

onceInCliMode('a client dropped mid-stream re-attaches with Last-Event-ID and gets exactly the missing events', async () => {
  const first = await install({ os: 'rockylinux', version: '9' }, { stopAfter: 5 });
  expect(first.events).toHaveLength(5);
  const workflowId = first.headers['x-workflow-id'] as string;
  const rest = await requestSse(`${h.api}/vm/install/${workflowId}/events`, { headers: { 'Last-Event-ID': '5' } });
  expect(rest.status).toBe(200);
  expect(rest.closed).toBe(true);
  expect(rest.events[0].id).toBe(6);
  const ids = [...first.events, ...rest.events].map((e) => e.id);
  expect(ids).toEqual(ids.map((_, i) => i + 1));
  expect(rest.events.at(-1)?.message).toBe('[*] User: rocky');

  // the whole stream again, from the start, is the same sequence
  const all = await requestSse(`${h.api}/vm/install/${workflowId}/events`);
  expect(all.events).toEqual([...first.events, ...rest.events]);

  const status = await (await fetch(`${h.api}/vm/install/${workflowId}`)).json();
  expect(status).toMatchObject({ success: true, status: 'COMPLETED', result: { vmid: vmidOf(rest), user: 'rocky' } });
});

onceInCliMode('10 concurrent installs get 10 distinct VMIDs and IPs and all succeed', async () => {
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => install({ os: 'debian', version: '12', name: `c${i}` })));
  for (const r of results) expect(r.events.filter((e) => e.status === 'error')).toEqual([]);
  const ids = results.map(vmidOf);
  expect(new Set(ids).size).toBe(10);
  const ips = results.map((r) => r.events.find((e) => e.message.startsWith('[*] IP: '))!.message);
  expect(new Set(ips).size).toBe(10);
}, 300_000);

onceInCliMode('cancelling an install stops it and removes the VM it created', async () => {
  await injectFaultOn(h, { op: 'start' }, { times: 1, latencyMs: 4000 });
  const before = await vmIds();
  const mark = await operationsMark(h);
  const stream = install({ os: 'debian', version: '13' });
  // wait until the VM exists, then cancel
  const workflowId = await waitFor('the install in visibility', async () => {
    const list = h.service.client.workflow.list({ query: `ExecutionStatus = 'Running' AND VmOs = 'debian-13' AND TaskQueue = '${h.config.temporal.taskQueue}'` });
    for await (const w of list) return w.workflowId;
    return undefined;
  }, 20_000, 200);
  await waitFor('the VM to exist', async () => (await vmIds()).length > before.length, 10_000);
  const cancel = await fetch(`${h.api}/vm/install/${workflowId}/cancel`, { method: 'POST', headers: { 'Content-Type': 'application/json' } });
  expect(cancel.status).toBe(202);
  const res = await stream;
  expect(res.events.at(-1)).toMatchObject({ status: 'error', message: '[-] install cancelled' });
  expect(await vmIds()).toEqual(before);
  expectOwnVmRemoved(await operations(h, mark));
});

onceInCliMode('a repeated POST with the same Idempotency-Key attaches to the same install', async () => {
  const headers = { 'Idempotency-Key': `key-${Date.now()}` };
  const [a, b] = await Promise.all([install({ os: 'debian', version: '12' }, { headers }), install({ os: 'debian', version: '12' }, { headers })]);
  expect(a.headers['x-workflow-id']).toBe(b.headers['x-workflow-id']);
  expect(vmidOf(a)).toBe(vmidOf(b));
  const c = await install({ os: 'debian', version: '12' }, { headers });
  expect(c.headers['x-workflow-id']).toBe(a.headers['x-workflow-id']);
  expect(c.events).toEqual(a.events);
});

onceInCliMode('a name with quotes and newlines is refused with a 400 naming the field; nothing starts', async () => {
  const before = await vmIds();
  const res = await install({ os: 'debian', version: '12', name: 'a"b\nc' });
  expect(res.status).toBe(400);
  const body = JSON.parse(res.body);
  expect(body).toMatchObject({ success: false });
  expect(body.message).toMatch(/^please check your input: name: /);
  expect(await vmIds()).toEqual(before);
});

test.each<[string, unknown, string]>([
  ['bridge', 'vmbr/0', 'bridge: must be a Proxmox bridge name like vmbr0: letters, digits, -, _ and ., at most 15 characters'],
  ['vlan', 4095, 'vlan: must be at most 4094'],
  ['mtu', 9001.5, 'mtu: must be an integer from 576 to 65520'],
  ['dns', { servers: ['192.0.2.53', 'resolver.example'] }, 'dns.servers[1]: must be an IPv4 or IPv6 address'],
])('a bad %s is refused with a 400 naming it; nothing starts', async (field, value, says) => {
  const before = await vmIds();
  const res = await install({ os: 'debian', version: '12', [field]: value });
  expect(res.status).toBe(400);
  expect(JSON.parse(res.body)).toMatchObject({ success: false, message: `please check your input: ${says}` });
  expect(await vmIds()).toEqual(before);
});

onceInCliMode('every install is findable with `temporal workflow list --query` by its search attributes', async () => {
  const res = await install({ os: 'ubuntu', version: '24.04', name: 'findme' });
  const vmid = vmidOf(res);
  const workflowId = res.headers['x-workflow-id'] as string;
  const out = await waitFor('the install in `temporal workflow list`', async () => {
    const { stdout } = await execa(LOCAL_CLI_PATH, [
      'workflow', 'list', '--address', process.env.TEST_TEMPORAL_ADDRESS!, '--namespace', h.config.temporal.namespace,
      '--query', `VmId = ${vmid} AND VmName = 'findme-${vmid}' AND VmOs = 'ubuntu-24.04' AND VmNode = 'pve1'`,
    ]);
    return stdout.includes(workflowId) && stdout;
  }, 15_000, 500);
  expect(out).toContain(workflowId);
  expect(out).toContain('installVm');
});
