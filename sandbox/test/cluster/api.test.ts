import fs from 'node:fs';
import os from 'node:os';
import { execa } from 'execa';
import { apiRequest, makeKeyPair, sshExec, eventually, startTestCluster, type ApiAnswer, type TestCluster } from '../../testkit';
import { startApiServer, type SandboxApi } from '../../api/start';
import { sandboxSourceDir } from '../../location';
import { startImageMirror, type ImageMirror } from '../../mirror/server';
import { readApiRequests } from '../../api/requestLog';
import { DEFAULT_PVE_VERSION, PVE_RELEASES } from '../../state/model';

/**
 * The sandbox's REST API (sandbox/api/) over real HTTPS: PVE's paths, JSON shapes, task
 * UPIDs and logs, token authentication, privilege checks and error answers, on the same
 * cluster state as its CLIs (what one does, the other sees).
 */
let t: TestCluster;
let api: SandboxApi;
let mirror: ImageMirror;

beforeAll(async () => {
  // `import` on `local`, as docs/proxmox-api.md configures it; the rest as installed.
  t = await startTestCluster({ api: { authFailureDelayMs: 0 }, storageContent: { local: ['backup', 'import', 'iso', 'vztmpl'] }, pools: ['lab', { poolid: 'prod', comment: 'production' }] });
  api = t.cluster.api!;
  // The tokens below are privilege-separated: their own ACL, within what their user has.
  t.cluster.createApiUser({ userid: 'qemurun@pve', acl: [{ path: '/', privs: ['Administrator'] }] });
  mirror = await startImageMirror();
});
afterAll(async () => {
  if (api && api !== t.cluster.api) await api.stop();
  await mirror?.stop();
  await t?.dispose();
});
afterEach(async () => {
  await t.cluster.clearFaults();
});

const call = (method: string, path: string, params: Record<string, string | number | boolean> = {}, o: { authorization?: string | null; json?: boolean } = {}) =>
  apiRequest(api, method, path, params, o);
const qm = (node: string, ...args: string[]) => execa('qm', args, { env: t.cluster.envFor(node), reject: false });
const data = <T>(a: ApiAnswer) => a.body!.data as T;

/** Runs `fn` with the cluster playing another release (every call reads cluster.json anew). */
async function playing<T>(pveVersion: string, fn: () => Promise<T>): Promise<T> {
  const file = `${t.cluster.dir}/sandbox/cluster.json`;
  const saved = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, saved.replace(DEFAULT_PVE_VERSION, pveVersion));
  try {
    return await fn();
  } finally {
    fs.writeFileSync(file, saved);
  }
}

interface TaskStatus {
  status: string;
  exitstatus?: string;
  type: string;
  id: string;
  user: string;
  tokenid?: string;
  node: string;
  pid: number;
}

const UPID = /^UPID:(pve[12]):([0-9A-F]{8}):([0-9A-F]{8,9}):([0-9A-F]{8}):(\w+):([^:]*):(root@pam!sandbox|[^:]+):$/;

async function task(a: ApiAnswer): Promise<{ status: TaskStatus; log: string[] }> {
  expect(a.status).toBe(200);
  const upid = data<string>(a);
  expect(upid).toMatch(UPID);
  const node = UPID.exec(upid)![1];
  const path = `/nodes/${node}/tasks/${encodeURIComponent(upid)}`;
  const status = await eventually(async () => {
    const s = data<TaskStatus>(await call('GET', `${path}/status`));
    if (s.status !== 'stopped') throw new Error(`task still ${s.status}`);
    return s;
  }, 30_000, 50);
  const log = await call('GET', `${path}/log`, { limit: 0 });
  return { status, log: data<Array<{ n: number; t: string }>>(log).map((l) => l.t) };
}

const BASIC = { name: 'api-vm', memory: 1024, cores: 1, net0: 'virtio,bridge=vmbr0', scsihw: 'virtio-scsi-single', serial0: 'socket' };

describe('HTTPS and tokens', () => {
  test('serves its own certificate, whose fingerprint it publishes, under /api2/json', async () => {
    expect(api.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(api.fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    const version = await call('GET', '/version');
    expect(version.fingerprint).toBe(api.fingerprint);
    expect(version.status).toBe(200);
    // Proxmox VE 9.1's pve-manager, built from commit 42db4a6c (what `pveversion` prints on 9.1).
    expect(data(version)).toEqual({ release: '9.1', repoid: '42db4a6cf33dac83', version: '9.1.1' });
    const nodes = data<Array<{ node: string; ssl_fingerprint: string; status: string }>>(await call('GET', '/nodes'));
    expect(nodes.map((n) => n.node)).toEqual(['pve1', 'pve2']);
    for (const n of nodes) expect(n.ssl_fingerprint).toBe(api.fingerprint);
  });

  test('401 without a token or with a wrong one, as PVE answers it (reason phrase, no body)', async () => {
    const none = await call('GET', '/version', {}, { authorization: null });
    expect([none.status, none.statusMessage, none.body]).toEqual([401, 'No ticket', undefined]);
    const wrong = await call('GET', '/version', {}, { authorization: `PVEAPIToken=root@pam!sandbox=${'0'.repeat(36)}` });
    expect([wrong.status, wrong.statusMessage, wrong.body]).toEqual([401, 'Authentication failed!', undefined]);
    const unknown = await call('GET', '/nodes', {}, { authorization: `PVEAPIToken=root@pam!nope=${api.token.secret}` });
    expect(unknown.status).toBe(401);
    // An unknown path is 501 only for who is authenticated.
    expect((await call('GET', '/nope', {}, { authorization: null })).status).toBe(401);
    const nope = await call('GET', '/nope');
    expect([nope.status, nope.body?.message]).toEqual([501, "Method 'GET /nope' not implemented"]);
  });
});

describe('creating and reading VMs', () => {
  test('create runs as a qmcreate task; the CLIs see the VM; config and resources show it', async () => {
    const next = data<string>(await call('GET', '/cluster/nextid'));
    expect(next).toMatch(/^\d+$/);
    const vmid = Number(next);
    const { status, log } = await task(await call('POST', '/nodes/pve1/qemu', { vmid, ...BASIC, ide2: 'local-lvm:cloudinit', ciuser: 'ops' }));
    expect(status).toMatchObject({ status: 'stopped', exitstatus: 'OK', type: 'qmcreate', id: String(vmid), user: 'root@pam', tokenid: 'sandbox', node: 'pve1' });
    expect(log).toEqual([`  Logical volume "vm-${vmid}-cloudinit" created.`, `ide2: successfully created disk 'local-lvm:vm-${vmid}-cloudinit,media=cdrom'`, 'TASK OK']);

    const cli = await qm('pve1', 'config', String(vmid));
    expect(cli.stdout).toMatch(/^name: api-vm$/m);
    expect(cli.stdout).toMatch(/^ciuser: ops$/m);
    const config = data<Record<string, unknown>>(await call('GET', `/nodes/pve1/qemu/${vmid}/config`));
    expect(config).toMatchObject({ name: 'api-vm', cores: 1, memory: '1024', ciuser: 'ops', digest: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect(config.net0).toMatch(/^virtio=BC:24:11:[0-9A-F:]{8},bridge=vmbr0$/);
    const vms = data<Array<Record<string, unknown>>>(await call('GET', '/cluster/resources', { type: 'vm' }));
    expect(vms.find((v) => v.vmid === vmid)).toMatchObject({ id: `qemu/${vmid}`, type: 'qemu', node: 'pve1', status: 'stopped', name: 'api-vm', maxmem: 1024 * 1024 ** 2 });
    expect(data<string>(await call('GET', '/cluster/nextid'))).not.toBe(next);
    const tasks = data<Array<Record<string, unknown>>>(await call('GET', '/nodes/pve1/tasks', { typefilter: 'qmcreate', vmid }));
    expect(tasks).toEqual([expect.objectContaining({ type: 'qmcreate', id: String(vmid), status: 'OK', user: 'root@pam', tokenid: 'sandbox', endtime: expect.any(Number) })]);
  });

  test('errors: a taken VMID (cluster-wide), bad parameters, a VM on another node, an unknown node', async () => {
    expect((await qm('pve2', 'create', '150', '--name', 'cli-made')).exitCode).toBe(0);
    const taken = await call('POST', '/nodes/pve1/qemu', { vmid: 150, ...BASIC });
    expect([taken.status, taken.statusMessage]).toEqual([500, "unable to create VM 150 - VM 150 already exists on node 'pve2'"]);
    expect(taken.body).toEqual({ data: null, message: "unable to create VM 150 - VM 150 already exists on node 'pve2'\n" });

    const bad = await call('POST', '/nodes/pve1/qemu', { vmid: 99, name: 'no_underscores', cores: 0, bogus: 1 });
    expect([bad.status, bad.statusMessage]).toEqual([400, 'Parameter verification failed.']);
    expect(bad.body!.errors).toEqual({
      vmid: 'invalid format - value does not look like a valid VM ID\n',
      name: 'invalid format - value does not look like a valid DNS name\n',
      cores: 'value must have a minimum value of 1',
      bogus: 'property is not defined in schema and the schema does not allow additional properties',
    });
    expect((await qm('pve1', 'config', '99')).exitCode).not.toBe(0);

    const elsewhere = await call('GET', '/nodes/pve1/qemu/150/config');
    expect([elsewhere.status, elsewhere.body?.message]).toEqual([500, "Configuration file 'nodes/pve1/qemu-server/150.conf' does not exist\n"]);
    const noNode = await call('GET', '/nodes/pve9/qemu/150/status/current');
    expect(noNode.status).toBe(500);
    expect(noNode.statusMessage).toMatch(/^hostname lookup 'pve9' failed/);
    const noStorage = await call('POST', '/nodes/pve1/qemu', { vmid: 152, scsi0: 'nope:4' });
    expect([noStorage.status, noStorage.statusMessage]).toEqual([500, "storage 'nope' does not exist"]);
    const json = await call('POST', '/nodes/pve1/qemu', { vmid: 151, name: 'json-body', onboot: true }, { json: true });
    expect((await task(json)).status.exitstatus).toBe('OK');
    expect((await qm('pve1', 'config', '151')).stdout).toMatch(/^onboot: 1$/m);
    // A change made against an older config is refused (the digest GET config gave).
    const { digest } = data<{ digest: string }>(await call('GET', '/nodes/pve1/qemu/151/config'));
    expect((await call('PUT', '/nodes/pve1/qemu/151/config', { name: 'first', digest })).status).toBe(200);
    const stale = await call('PUT', '/nodes/pve1/qemu/151/config', { name: 'second', digest });
    expect([stale.status, stale.statusMessage]).toEqual([500, 'checksum mismatch (file change by other user?)']);
    expect((await qm('pve1', 'config', '151')).stdout).toMatch(/^name: first$/m);
  });

  test("tags and description as qemu-server checks and stores them: pve-tag's rule, 8192 characters, Proxmox's texts", async () => {
    expect((await task(await call('POST', '/nodes/pve1/qemu', { vmid: 170, name: 'tagged', tags: 'Web,prod;web debian' }))).status.exitstatus).toBe('OK');
    expect((await qm('pve1', 'config', '170')).stdout).toMatch(/^tags: debian;prod;web$/m);
    const badTag = await call('POST', '/nodes/pve1/qemu', { vmid: 171, tags: 'web,-x' });
    expect([badTag.status, badTag.body!.errors]).toEqual([400, { tags: 'invalid format - invalid characters in tag\n' }]);
    const cliTag = await qm('pve1', 'set', '170', '--tags', 'a!b');
    expect(cliTag.exitCode).toBe(255);
    expect(cliTag.stderr).toMatch(/^400 Parameter verification failed\.\ntags: invalid format - invalid characters in tag\n/);
    const long = await call('PUT', '/nodes/pve1/qemu/170/config', { description: 'x'.repeat(8193) });
    expect([long.status, long.body!.errors]).toEqual([400, { description: 'value may only be 8192 characters long' }]);
    expect((await call('PUT', '/nodes/pve1/qemu/170/config', { description: 'x'.repeat(8192) })).status).toBe(200);
    expect((await qm('pve1', 'destroy', '170', '--purge')).exitCode).toBe(0);
  });

  test('pools: create --pool adds the VM (user.cfg, not its config), a missing pool is refused first, destroy --purge removes it', async () => {
    expect(data(await call('GET', '/pools'))).toEqual([{ poolid: 'lab' }, { poolid: 'prod', comment: 'production' }]);
    // check_pool_exist is create_vm's first check after parameter validation.
    const missing = await call('POST', '/nodes/pve1/qemu', { vmid: 163, pool: 'nope' });
    expect([missing.status, missing.statusMessage]).toEqual([403, "Permission check failed (pool 'nope' does not exist)"]);
    const cliMissing = await qm('pve1', 'create', '161', '--pool', 'nope');
    expect([cliMissing.exitCode, cliMissing.stderr]).toEqual([255, "403 Permission check failed (pool 'nope' does not exist)"]);
    expect((await qm('pve1', 'config', '161')).exitCode).not.toBe(0);

    expect((await task(await call('POST', '/nodes/pve1/qemu', { vmid: 160, ...BASIC, pool: 'lab' }))).status.exitstatus).toBe('OK');
    expect((await qm('pve2', 'create', '162', '--pool', 'lab')).exitCode).toBe(0);
    expect((await qm('pve1', 'config', '160')).stdout).not.toMatch(/pool/);
    const members = data<{ members: Array<Record<string, unknown>> }>(await call('GET', '/pools/lab')).members;
    expect(members.map((m) => [m.vmid, m.node, m.pool])).toEqual([[160, 'pve1', 'lab'], [162, 'pve2', 'lab']]);
    const vms = data<Array<Record<string, unknown>>>(await call('GET', '/cluster/resources', { type: 'vm' }));
    expect(vms.find((v) => v.vmid === 160)).toMatchObject({ pool: 'lab' });
    expect(data(await call('GET', '/cluster/resources', { type: 'pool' }))).toEqual([
      { id: '/pool/lab', pool: 'lab', type: 'pool' },
      { id: '/pool/prod', pool: 'prod', type: 'pool', comment: 'production' },
    ]);

    // Without --purge the VM stays listed in its pool, as on Proxmox; with it, it leaves.
    expect((await qm('pve2', 'destroy', '162')).exitCode).toBe(0);
    expect((await task(await call('DELETE', '/nodes/pve1/qemu/160', { purge: 1 }))).status.exitstatus).toBe('OK');
    expect(data<{ members: unknown[] }>(await call('GET', '/pools/lab')).members).toEqual([]);
    const unknown = await call('GET', '/pools/nope');
    expect([unknown.status, unknown.statusMessage]).toEqual([500, "pool 'nope' does not exist"]);
  });
});

describe('privileges', () => {
  test('a token without VM.Allocate gets 403 and nothing is created', async () => {
    const weak = t.cluster.createApiToken({ tokenid: 'qemurun@pve!weak', acl: [{ path: '/', privs: ['VM.Audit', 'VM.Config.CPU', 'VM.Config.Memory', 'VM.Config.Options', 'VM.Config.Network', 'VM.Config.HWType', 'Sys.Audit'] }] });
    const res = await call('POST', '/nodes/pve1/qemu', { vmid: 160, ...BASIC }, { authorization: weak.authorization });
    // create_vm checks VM.Allocate on the VM or its pool and names neither.
    expect([res.status, res.statusMessage, res.body]).toEqual([403, 'Permission check failed', { data: null, message: 'Permission check failed\n' }]);
    expect((await qm('pve1', 'config', '160')).exitCode).not.toBe(0);
    expect(data<string>(await call('GET', '/cluster/nextid', { vmid: 160 }))).toBe('160');
  });

  test("a privilege-separated token has what both its ACL and its user's grant; one without, its user's", async () => {
    expect((await qm('pve1', 'create', '166', '--name', 'p166')).exitCode).toBe(0);
    t.cluster.createApiUser({ userid: 'ops@pve', acl: [{ path: '/vms', privs: ['PVEAuditor'] }] });
    const mine = { path: '/', privs: ['PVEVMAdmin'] };
    const sep = t.cluster.createApiToken({ tokenid: 'ops@pve!sep', acl: [mine] });
    // The role on the token alone gives nothing the user lacks (RPCEnvironment's intersection).
    const create = await call('POST', '/nodes/pve1/qemu', { vmid: 165, ...BASIC }, { authorization: sep.authorization });
    expect([create.status, create.statusMessage]).toEqual([403, 'Permission check failed']);
    // VM.Audit on /vms: both grant it.
    expect((await call('GET', '/nodes/pve1/qemu/166/config', {}, { authorization: sep.authorization })).status).toBe(200);
    // Sys.Audit on /nodes: the token's role has it, the user has nothing there.
    const node = await call('GET', '/nodes/pve1/status', {}, { authorization: sep.authorization });
    expect([node.status, node.statusMessage]).toEqual([403, 'Permission check failed (/nodes/pve1, Sys.Audit)']);
    // Without privilege separation the token's own ACL does not count: the user's does.
    const whole = t.cluster.createApiToken({ tokenid: 'ops@pve!whole', privsep: false, acl: [mine] });
    expect((await call('GET', '/nodes/pve1/status', {}, { authorization: whole.authorization })).status).toBe(403);
    expect((await call('GET', '/nodes/pve1/qemu/166/config', {}, { authorization: whole.authorization })).status).toBe(200);
    // A token of a user user.cfg does not have cannot be made.
    expect(() => t.cluster.createApiToken({ tokenid: 'nobody@pve!xx', acl: [mine] })).toThrow("no such user ('nobody@pve')");
  });

  test('a missing privilege on a path is named: VM.Config.Memory, VM.PowerMgmt, VM.Audit per VM', async () => {
    expect((await qm('pve1', 'create', '161', '--name', 'p161')).exitCode).toBe(0);
    expect((await qm('pve1', 'create', '162', '--name', 'p162')).exitCode).toBe(0);
    const scoped = t.cluster.createApiToken({ tokenid: 'qemurun@pve!scoped', acl: [{ path: '/vms/161', privs: ['VM.Audit', 'VM.Config.CPU'] }] });
    const as = { authorization: scoped.authorization };
    expect((await call('GET', '/nodes/pve1/qemu/161/config', {}, as)).status).toBe(200);
    const other = await call('GET', '/nodes/pve1/qemu/162/config', {}, as);
    expect([other.status, other.statusMessage]).toEqual([403, 'Permission check failed (/vms/162, VM.Audit)']);
    const mem = await call('PUT', '/nodes/pve1/qemu/161/config', { cores: 2, memory: 2048 }, as);
    expect([mem.status, mem.statusMessage]).toEqual([403, 'Permission check failed (/vms/161, VM.Config.Memory)']);
    const start = await call('POST', '/nodes/pve1/qemu/161/status/start', {}, as);
    expect([start.status, start.statusMessage]).toEqual([403, 'Permission check failed (/vms/161, VM.PowerMgmt)']);
    const ci = await call('PUT', '/nodes/pve1/qemu/161/config', { ciuser: 'x' }, as);
    expect(ci.statusMessage).toBe('Permission check failed (/vms/161, VM.Config.Cloudinit|VM.Config.Network)');
    expect((await call('PUT', '/nodes/pve1/qemu/161/config', { cores: 2 }, as)).status).toBe(200);
    expect((await qm('pve1', 'config', '161')).stdout).toMatch(/^cores: 2$/m);
    // Only what the token may audit is listed.
    const vms = data<Array<{ vmid: number }>>(await call('GET', '/cluster/resources', { type: 'vm' }, as));
    expect(vms.map((v) => v.vmid)).toEqual([161]);
    const dl = await call('POST', '/nodes/pve1/storage/local/download-url', { url: 'http://127.0.0.1:1/x.qcow2', content: 'import', filename: 'x.qcow2' }, as);
    expect([dl.status, dl.statusMessage]).toEqual([403, 'Permission check failed (/storage/local, Datastore.AllocateTemplate)']);
  });
});

describe('the privileges of the release the cluster plays: Proxmox VE 9 (the default) and 8.4', () => {
  const pveum = (...args: string[]) => execa('pveum', args, { env: t.cluster.envFor('pve1'), reject: false });

  test("pveum role add refuses a privilege the release does not know, in pve-access-control's words", async () => {
    // 9 dropped VM.Monitor (pve-access-control "privileges: drop VM.Monitor"); verify_privname.
    const monitor = await pveum('role', 'add', 'Agent9', '-privs', 'VM.Monitor');
    expect([monitor.exitCode, monitor.stdout, monitor.stderr]).toEqual([
      255,
      '',
      "400 Parameter verification failed.\nprivs: invalid format - invalid privilege 'VM.Monitor'\npveum role add <roleid> [OPTIONS]",
    ]);
    expect((await pveum('role', 'add', 'Agent9', '-privs', 'VM.GuestAgent.Audit,VM.GuestAgent.FileRead')).exitCode).toBe(0);
    const modify = await pveum('role', 'modify', 'Agent9', '--privs', 'VM.Monitor', '--append', '1');
    expect([modify.exitCode, modify.stderr]).toEqual([255, "400 Parameter verification failed.\nprivs: invalid format - invalid privilege 'VM.Monitor'\npveum role modify <roleid> [OPTIONS]"]);
    await playing(PVE_RELEASES['8.4'], async () => {
      const agent = await pveum('role', 'add', 'Agent8', '-privs', 'VM.Audit VM.GuestAgent.Audit');
      expect([agent.exitCode, agent.stderr]).toEqual([255, "400 Parameter verification failed.\nprivs: invalid format - invalid privilege 'VM.GuestAgent.Audit'\npveum role add <roleid> [OPTIONS]"]);
      expect((await pveum('role', 'add', 'Agent8', '-privs', 'VM.Audit VM.Monitor')).exitCode).toBe(0);
    });
    const again = await pveum('role', 'add', 'Agent8', '-privs', 'VM.Audit');
    expect([again.exitCode, again.stderr]).toEqual([255, "create role failed: role 'Agent8' already exists"]);
  });

  test('/version and /nodes/{node}/version answer the release played', async () => {
    await playing(PVE_RELEASES['8.4'], async () => {
      expect(data(await call('GET', '/version'))).toEqual({ release: '8.4', repoid: '2a5fa54a8503f96d', version: '8.4.1' });
      expect(data(await call('GET', '/nodes/pve2/version'))).toEqual({ release: '8.4', repoid: '2a5fa54a8503f96d', version: '8.4.1' });
    });
    expect(data(await call('GET', '/nodes/pve2/version'))).toEqual({ release: '9.1', repoid: '42db4a6cf33dac83', version: '9.1.1' });
  });

  test('/cluster/nextid answers a JSON string on both releases, though its schema says integer', async () => {
    // pve-manager PVE/API2/Cluster.pm nextid: JSON::XS writes the `$i` a hash lookup stringified as a string.
    const raw = async () => {
      const next = await call('GET', '/cluster/nextid');
      const asked = await call('GET', '/cluster/nextid', { vmid: 4242 });
      const pvesh = await execa('pvesh', ['get', '/cluster/nextid', '--output-format', 'json'], { env: t.cluster.envFor('pve1') });
      return [typeof next.body?.data, asked.body?.data, pvesh.stdout.startsWith('"')];
    };
    expect(await raw()).toEqual(['string', '4242', true]);
    expect(await playing(PVE_RELEASES['8.4'], raw)).toEqual(['string', '4242', true]);
  });
});

describe('privileges as qemu-server and pve-manager check them', () => {
  // Everything a VM's configuration asks for, but what each test leaves out.
  const ALL = ['VM.Allocate', 'VM.Audit', 'VM.Config.CDROM', 'VM.Config.CPU', 'VM.Config.Cloudinit', 'VM.Config.Disk', 'VM.Config.HWType', 'VM.Config.Memory', 'VM.Config.Network', 'VM.Config.Options', 'VM.PowerMgmt', 'Datastore.AllocateSpace', 'Datastore.Audit', 'Sys.Audit', 'SDN.Use'];
  const tokenWithout = (id: string, ...missing: string[]) =>
    t.cluster.createApiToken({ tokenid: `qemurun@pve!${id}`, acl: [{ path: '/', privs: ALL.filter((p) => !missing.includes(p)) }] });

  test('a bridge needs SDN.Use in the localnetwork zone, at create and when set; a VLAN on its tag', async () => {
    const noSdn = { authorization: tokenWithout('nosdn', 'SDN.Use').authorization };
    const create = await call('POST', '/nodes/pve1/qemu', { vmid: 175, ...BASIC }, noSdn);
    expect([create.status, create.statusMessage]).toEqual([403, 'Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)']);
    expect((await qm('pve1', 'config', '175')).exitCode).not.toBe(0);
    const tagged = await call('POST', '/nodes/pve1/qemu', { vmid: 175, ...BASIC, net0: 'virtio,bridge=vmbr0,tag=20' }, noSdn);
    expect(tagged.statusMessage).toBe('Permission check failed (/sdn/zones/localnetwork/vmbr0/20, SDN.Use)');
    // SDN.Use on the bridge alone is enough, its VLANs included.
    const onBridge = t.cluster.createApiToken({
      tokenid: 'qemurun@pve!bridge',
      acl: [{ path: '/', privs: ALL.filter((p) => p !== 'SDN.Use') }, { path: '/sdn/zones/localnetwork/vmbr0', privs: ['SDN.Use'] }],
    });
    expect((await task(await call('POST', '/nodes/pve1/qemu', { vmid: 175, ...BASIC, net0: 'virtio,bridge=vmbr0,tag=20' }, { authorization: onBridge.authorization }))).status.exitstatus).toBe('OK');
    const set = await call('PUT', '/nodes/pve1/qemu/175/config', { net0: 'virtio,bridge=vmbr0' }, noSdn);
    expect([set.status, set.statusMessage]).toEqual([403, 'Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)']);
  });

  test('a serial socket needs VM.Config.HWType; a host device is for root@pam alone', async () => {
    const noHw = await call('POST', '/nodes/pve1/qemu', { vmid: 176, ...BASIC }, { authorization: tokenWithout('nohw', 'VM.Config.HWType').authorization });
    expect([noHw.status, noHw.statusMessage]).toEqual([403, 'Permission check failed (/vms/176, VM.Config.HWType)']);
    const dev = await call('POST', '/nodes/pve1/qemu', { vmid: 176, ...BASIC, serial0: '/dev/ttyS0' }, { authorization: tokenWithout('all').authorization });
    expect([dev.status, dev.body?.message]).toEqual([500, "only root can set 'serial0' config for real devices\n"]);
  });

  test('booleans over HTTP are 1 or 0 (or JSON true/false); yes and true are refused', async () => {
    const form = await call('POST', '/nodes/pve1/qemu', { vmid: 178, ...BASIC, numa: 'true' });
    expect([form.status, form.body?.errors]).toEqual([400, { numa: "type check ('boolean') failed - got 'true'" }]);
    const yes = await call('PUT', '/nodes/pve1/qemu/999/config', { numa: 'yes' });
    expect([yes.status, yes.body?.errors]).toEqual([400, { numa: "type check ('boolean') failed - got 'yes'" }]);
    expect((await task(await call('POST', '/nodes/pve1/qemu', { vmid: 178, ...BASIC, numa: true }, { json: true }))).status.exitstatus).toBe('OK');
    expect((await qm('pve1', 'config', '178')).stdout).toMatch(/^numa: 1$/m);
  });

  test('the cloud-init drive needs VM.Config.Cloudinit and VM.Config.CDROM; a new VM\'s disks only space on the storage', async () => {
    // create_vm checks no VM.Config.Disk: a new disk needs Datastore.AllocateSpace.
    const noDisk = tokenWithout('nodisk', 'VM.Config.Disk');
    const created = await call('POST', '/nodes/pve1/qemu', { vmid: 177, ...BASIC, scsi0: 'local-lvm:1' }, { authorization: noDisk.authorization });
    expect((await task(created)).status.exitstatus).toBe('OK');
    const noCdrom = await call('PUT', '/nodes/pve1/qemu/177/config', { ide2: 'local-lvm:cloudinit' }, { authorization: tokenWithout('nocdrom', 'VM.Config.CDROM').authorization });
    expect([noCdrom.status, noCdrom.statusMessage]).toEqual([403, 'Permission check failed (/vms/177, VM.Config.CDROM)']);
    const noCi = await call('PUT', '/nodes/pve1/qemu/177/config', { ide2: 'local-lvm:cloudinit' }, { authorization: tokenWithout('noci', 'VM.Config.Cloudinit').authorization });
    expect(noCi.statusMessage).toBe('Permission check failed (/vms/177, VM.Config.Cloudinit)');
    expect((await qm('pve1', 'config', '177')).stdout).not.toMatch(/^ide2:/m);
    // Cloudinit and CDROM without VM.Config.Disk: the drive is made.
    expect((await call('PUT', '/nodes/pve1/qemu/177/config', { ide2: 'local-lvm:cloudinit' }, { authorization: noDisk.authorization })).status).toBe(200);
    expect((await qm('pve1', 'config', '177')).stdout).toMatch(/^ide2: local-lvm:vm-177-cloudinit,media=cdrom$/m);
    // A disk set on an existing VM needs VM.Config.Disk, checked in the task (POST) once it holds the config.
    const disk = await task(await call('POST', '/nodes/pve1/qemu/177/config', { scsi1: 'local-lvm:1' }, { authorization: noDisk.authorization }));
    expect(disk.status.exitstatus).toBe('Permission check failed (/vms/177, VM.Config.Disk)');
  });

  test('/cluster/resources: storages with Datastore.Audit only; nodes always, their usage with Sys.Audit', async () => {
    const space = t.cluster.createApiToken({ tokenid: 'qemurun@pve!space', acl: [{ path: '/storage', privs: ['Datastore.AllocateSpace'] }] });
    const seen = data<Array<Record<string, unknown>>>(await call('GET', '/cluster/resources', {}, { authorization: space.authorization }));
    expect(seen.filter((e) => e.type === 'storage')).toEqual([]);
    const nodes = seen.filter((e) => e.type === 'node');
    expect(nodes.map((n) => n.node)).toEqual(['pve1', 'pve2']);
    expect(nodes[0]).not.toHaveProperty('maxmem');
    expect(nodes[0]).toMatchObject({ id: 'node/pve1', status: 'online' });
    const audit = t.cluster.createApiToken({ tokenid: 'qemurun@pve!audit', acl: [{ path: '/storage', privs: ['Datastore.Audit'] }, { path: '/nodes', privs: ['Sys.Audit'] }] });
    const all = data<Array<Record<string, unknown>>>(await call('GET', '/cluster/resources', {}, { authorization: audit.authorization }));
    expect(all.filter((e) => e.type === 'storage').length).toBeGreaterThan(0);
    expect(all.find((e) => e.type === 'node')).toHaveProperty('maxmem');
  });
});

describe('NIC tag and mtu over HTTP', () => {
  test('a bad tag is a 400 naming net0.tag; an mtu above the bridge\'s fails the start task in qemu-server\'s words', async () => {
    expect((await task(await call('POST', '/nodes/pve1/qemu', { vmid: 185, ...BASIC }))).status.exitstatus).toBe('OK');
    const bad = await call('PUT', '/nodes/pve1/qemu/185/config', { net0: 'virtio,bridge=vmbr0,tag=5000', nameserver: 'a,b_c' });
    expect([bad.status, bad.statusMessage]).toEqual([400, 'Parameter verification failed.']);
    expect(bad.body!.errors).toEqual({
      net0: 'invalid format - format error\n',
      'net0.tag': 'value must have a maximum value of 4094',
      nameserver: 'invalid format - value does not look like a valid address: b_c\n',
    });
    expect((await call('PUT', '/nodes/pve1/qemu/185/config', { net0: 'virtio,bridge=vmbr0,mtu=9000,tag=20', nameserver: '192.0.2.53', searchdomain: 'lab.example' })).status).toBe(200);
    expect(data<Record<string, string>>(await call('GET', '/nodes/pve1/qemu/185/config'))).toMatchObject({
      net0: expect.stringMatching(/^virtio=BC:24:11(:[0-9A-F]{2}){3},bridge=vmbr0,mtu=9000,tag=20$/),
      nameserver: '192.0.2.53',
      searchdomain: 'lab.example',
    });
    const start = await task(await call('POST', '/nodes/pve1/qemu/185/status/start'));
    const mtuError = "netdev net0: MTU '9000' is bigger than the bridge MTU '1500' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.";
    expect([start.status.exitstatus, start.log.at(-1)]).toEqual([mtuError, `TASK ERROR: ${mtuError}`]);
    expect((await qm('pve1', 'status', '185')).stdout).toBe('status: stopped');
  });
});

describe('a node\'s network over HTTP', () => {
  test('GET /nodes/{node}/network lists its interfaces, `type` keeps the bridges', async () => {
    const all = data<Array<{ iface: string; type: string }>>(await call('GET', '/nodes/pve2/network'));
    expect(all.map((i) => [i.iface, i.type])).toEqual([['eno1', 'eth'], ['vmbr0', 'bridge']]);
    expect(data<Array<{ iface: string }>>(await call('GET', '/nodes/pve1/network', { type: 'any_bridge' })).map((i) => i.iface)).toEqual(['vmbr0']);
    const bad = await call('GET', '/nodes/pve1/network', { type: 'wifi' });
    expect([bad.status, bad.statusMessage]).toEqual([400, 'Parameter verification failed.']);
  });

  test('a bridge is listed only to a token with SDN.Audit or SDN.Use on it (or on one of its VLANs), on 9 and 8.4', async () => {
    // pve-manager PVE/API2/Network.pm `index` ("always check bridge access") →
    // pve-access-control RPCEnvironment.pm `check_sdn_bridge`.
    const file = `${t.cluster.dir}/sandbox/cluster.json`;
    const saved = fs.readFileSync(file, 'utf8');
    const model = JSON.parse(saved) as { nodes: Array<{ name: string; bridges?: string[] }> };
    model.nodes.find((n) => n.name === 'pve1')!.bridges = ['vmbr0', 'vmbr1', 'vmbr2'];
    fs.writeFileSync(file, JSON.stringify(model));
    try {
      let n = 0;
      const listed = async (acl: Array<{ path: string; privs: string[] }>, type?: string) => {
        const tok = t.cluster.createApiToken({ tokenid: `qemurun@pve!net${++n}`, acl });
        const a = await call('GET', '/nodes/pve1/network', type ? { type } : {}, { authorization: tok.authorization });
        expect(a.status).toBe(200);
        return data<Array<{ iface: string }>>(a).map((i) => i.iface);
      };
      const audit = [{ path: '/nodes', privs: ['Sys.Audit'] }];
      expect(await listed(audit)).toEqual(['eno1']);
      expect(await listed([...audit, { path: '/sdn', privs: ['SDN.Use'] }], 'any_bridge')).toEqual(['vmbr0', 'vmbr1', 'vmbr2']);
      expect(await listed([...audit, { path: '/sdn/zones/localnetwork/vmbr1', privs: ['SDN.Audit'] }])).toEqual(['eno1', 'vmbr1']);
      // An ACL on a VLAN of the bridge is enough to see the bridge.
      expect(await listed([...audit, { path: '/sdn/zones/localnetwork/vmbr2/20', privs: ['SDN.Use'] }], 'any_bridge')).toEqual(['vmbr2']);
      // SDN.Allocate alone is not one of the two.
      expect(await listed([...audit, { path: '/sdn', privs: ['SDN.Allocate'] }], 'any_bridge')).toEqual([]);
      await playing(PVE_RELEASES['8.4'], async () => {
        expect(await listed([{ path: '/sdn/zones/localnetwork/vmbr0', privs: ['SDN.Use'] }, ...audit], 'any_bridge')).toEqual(['vmbr0']);
      });
      // root (pvesh on the node) sees them all.
      const pvesh = await execa('pvesh', ['get', '/nodes/pve1/network', '--type', 'any_bridge', '--output-format', 'json'], { env: t.cluster.envFor('pve1') });
      expect((JSON.parse(pvesh.stdout) as Array<{ iface: string }>).map((i) => i.iface)).toEqual(['vmbr0', 'vmbr1', 'vmbr2']);
    } finally {
      fs.writeFileSync(file, saved);
    }
  });
});

describe('images by the node: download-url and import-from', () => {
  test('downloads into <storage>:import/, verifies the checksum, and a disk is imported from it', async () => {
    const img = mirror.image('debian', '12');
    const params = { url: img.url, content: 'import', filename: 'debian-12-generic-amd64.qcow2', checksum: img.sha512, 'checksum-algorithm': 'sha512' };
    const { status, log } = await task(await call('POST', '/nodes/pve1/storage/local/download-url', params));
    expect(status).toMatchObject({ type: 'download', id: 'debian-12-generic-amd64.qcow2', exitstatus: 'OK' });
    expect(log[0]).toBe(`downloading ${img.url} to /var/lib/vz/import/debian-12-generic-amd64.qcow2`);
    expect(log).toContain('calculating checksum...OK, checksum verified');
    expect(log.slice(-2)).toEqual([`download of '${img.url}' to '/var/lib/vz/import/debian-12-generic-amd64.qcow2' finished`, 'TASK OK']);
    const content = data<Array<Record<string, unknown>>>(await call('GET', '/nodes/pve1/storage/local/content', { content: 'import' }));
    expect(content).toEqual([expect.objectContaining({ volid: 'local:import/debian-12-generic-amd64.qcow2', format: 'qcow2', size: img.content.length, content: 'import' })]);

    // Once per storage and release: the same file again is not downloaded twice.
    const again = await task(await call('POST', '/nodes/pve1/storage/local/download-url', params));
    expect(again.log).toContain('calculating checksum of existing file...OK, got correct file already, no need to download');

    const created = await task(await call('POST', '/nodes/pve1/qemu', { vmid: 170, ...BASIC, scsi0: 'local-lvm:0,import-from=local:import/debian-12-generic-amd64.qcow2,discard=on', boot: 'order=scsi0' }));
    expect(created.status.exitstatus).toBe('OK');
    expect(created.log).toContain('scsi0: successfully created disk \'local-lvm:vm-170-disk-0,discard=on,size=2G\'');
    expect((await qm('pve1', 'config', '170')).stdout).toMatch(/^scsi0: local-lvm:vm-170-disk-0,discard=on,size=2G$/m);
  });

  test('a node older than 8.4 refuses content=import, as 8.3 did', async () => {
    // The same cluster playing 8.3 (a started cluster reads its model on every request).
    const file = `${t.cluster.dir}/sandbox/cluster.json`;
    const saved = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, saved.replace(DEFAULT_PVE_VERSION, 'pve-manager/8.3.2/c1689ccb1065a83b'));
    try {
      expect(data(await call('GET', '/version'))).toMatchObject({ release: '8.3', version: '8.3.2' });
      const img = mirror.image('debian', '12');
      const old = await call('POST', '/nodes/pve1/storage/local/download-url', { url: img.url, content: 'import', filename: 'old.qcow2' });
      expect([old.status, old.body?.errors]).toEqual([400, { content: "value 'import' does not have a value in the enumeration 'iso, vztmpl'" }]);
    } finally {
      fs.writeFileSync(file, saved);
    }
  });

  test("in a mixed cluster each node answers /nodes/{node}/version with its own, and download-url follows the node's", async () => {
    const file = `${t.cluster.dir}/sandbox/cluster.json`;
    const saved = fs.readFileSync(file, 'utf8');
    const model = JSON.parse(saved) as { nodes: Array<{ name: string; pveVersion?: string }> };
    model.nodes.find((n) => n.name === 'pve2')!.pveVersion = '8.3.2';
    fs.writeFileSync(file, JSON.stringify(model));
    try {
      expect(data(await call('GET', '/version'))).toMatchObject({ release: '9.1', version: '9.1.1' });
      expect(data(await call('GET', '/nodes/pve2/version'))).toMatchObject({ release: '8.3', version: '8.3.2' });
      expect(data(await call('GET', '/nodes/pve1/version'))).toMatchObject({ release: '9.1', version: '9.1.1' });
      const img = mirror.image('debian', '12');
      const old = await call('POST', '/nodes/pve2/storage/local/download-url', { url: img.url, content: 'import', filename: 'old.qcow2' });
      expect([old.status, old.body?.errors]).toEqual([400, { content: "value 'import' does not have a value in the enumeration 'iso, vztmpl'" }]);
      expect((await call('GET', '/nodes/pve9/version')).status).toBe(500);
    } finally {
      fs.writeFileSync(file, saved);
    }
  });

  test('a wrong checksum fails the task and leaves no file; a non-file storage and a bad name fail the request', async () => {
    const img = mirror.image('ubuntu', '24.04');
    const { status, log } = await task(await call('POST', '/nodes/pve1/storage/local/download-url', { url: img.url, content: 'import', filename: 'noble.qcow2', checksum: '0'.repeat(64), 'checksum-algorithm': 'sha256' }));
    expect(status.exitstatus).toBe(`checksum mismatch: got '${img.sha256}' != expect '${'0'.repeat(64)}'`);
    expect(log.slice(-2)).toEqual(['calculating checksum...', `TASK ERROR: checksum mismatch: got '${img.sha256}' != expect '${'0'.repeat(64)}'`]);
    const listed = data<Array<{ volid: string }>>(await call('GET', '/nodes/pve1/storage/local/content', { content: 'import' }));
    expect(listed.map((v) => v.volid)).not.toContain('local:import/noble.qcow2');

    const lvm = await call('POST', '/nodes/pve1/storage/local-lvm/download-url', { url: img.url, content: 'import', filename: 'noble.qcow2' });
    expect([lvm.status, lvm.statusMessage]).toEqual([500, "can't upload to storage type 'lvmthin', not a file based storage!"]);
    const name = await call('POST', '/nodes/pve1/storage/local/download-url', { url: img.url, content: 'import', filename: 'noble.img' });
    expect([name.status, name.body?.errors]).toEqual([400, { filename: 'invalid filename or wrong extension' }]);
    const missing = await call('POST', '/nodes/pve1/qemu', { vmid: 171, scsi0: 'local-lvm:0,import-from=local:import/nope.qcow2' });
    const failed = await task(missing);
    expect(failed.status.exitstatus).toBe("unable to create VM 171 - cannot import from 'local:import/nope.qcow2' - could not get file size of /var/lib/vz/import/nope.qcow2");
    expect((await qm('pve1', 'config', '171')).exitCode).not.toBe(0);
  });
});

describe('lifecycle tasks on the CLIs\' state', () => {
  test('config, resize, start, status, migrate, shutdown, destroy; wrong states fail as PVE fails', async () => {
    const guestKey = makeKeyPair(t.tmp, 'api_guest');
    const img = mirror.image('debian', '12');
    await task(await call('POST', '/nodes/pve1/storage/local/download-url', { url: img.url, content: 'import', filename: 'debian-12-generic-amd64.qcow2', checksum: img.sha256, 'checksum-algorithm': 'sha256' }));
    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 180, ...BASIC, scsi0: 'local-lvm:0,import-from=local:import/debian-12-generic-amd64.qcow2' }));

    const cfg = await task(await call('POST', '/nodes/pve1/qemu/180/config', { ide2: 'local-lvm:cloudinit', ciuser: 'ops', sshkeys: encodeURIComponent(guestKey.publicKey), boot: 'order=scsi0' }));
    expect(cfg.status).toMatchObject({ type: 'qmconfig', exitstatus: 'OK' });
    expect(cfg.log[0]).toMatch(/^update VM 180: -boot order=scsi0 -ciuser ops -ide2 local-lvm:cloudinit -sshkeys ssh-ed25519/);
    await call('PUT', '/nodes/pve1/qemu/180/config', { cipassword: 'secret' });
    const dump = data<string>(await call('GET', '/nodes/pve1/qemu/180/cloudinit/dump', { type: 'user' }));
    expect(dump).toBe((await qm('pve1', 'cloudinit', 'dump', '180', 'user')).stdout + '\n');
    expect(dump).toMatch(/^password: \$5\$/m);
    const auditor = t.cluster.createApiToken({ tokenid: 'qemurun@pve!audit', acl: [{ path: '/', privs: ['PVEAuditor'] }] });
    const masked = data<string>(await call('GET', '/nodes/pve1/qemu/180/cloudinit/dump', { type: 'user' }, { authorization: auditor.authorization }));
    expect(masked).toMatch(/^password: \*{10}$/m);
    const storages = data<Array<{ storage: string; type: string; active: number }>>(await call('GET', '/nodes/pve1/storage', { content: 'images' }));
    // As installed, `local` holds no disks (pve-installer StorageConfig.pm): only the thin pool does.
    expect(storages.map((s) => s.storage)).toEqual(['local-lvm']);
    const onLocal = await call('PUT', '/nodes/pve1/qemu/180/config', { scsi1: 'local:1' });
    expect([onLocal.status, onLocal.body?.errors]).toEqual([400, { storage: "storage 'local' does not support vm images" }]);
    expect(data(await call('GET', '/nodes/pve1/storage/local-lvm/status'))).toMatchObject({ type: 'lvmthin', active: 1, enabled: 1, total: expect.any(Number), used: expect.any(Number), avail: expect.any(Number) });
    const resized = await task(await call('PUT', '/nodes/pve1/qemu/180/resize', { disk: 'scsi0', size: '+2G' }));
    expect(resized.status).toMatchObject({ type: 'resize', exitstatus: 'OK' });
    expect((await qm('pve1', 'config', '180')).stdout).toMatch(/^scsi0: local-lvm:vm-180-disk-0,size=4G$/m);
    const shrink = await task(await call('PUT', '/nodes/pve1/qemu/180/resize', { disk: 'scsi0', size: '1G' }));
    expect(shrink.status.exitstatus).toBe('shrinking disks is not supported');

    expect((await task(await call('POST', '/nodes/pve1/qemu/180/status/start'))).status).toMatchObject({ type: 'qmstart', exitstatus: 'OK' });
    expect((await qm('pve1', 'status', '180')).stdout).toBe('status: running');
    expect(data(await call('GET', '/nodes/pve1/qemu/180/status/current'))).toMatchObject({ status: 'running', qmpstatus: 'running', vmid: 180, name: 'api-vm' });
    const twice = await task(await call('POST', '/nodes/pve1/qemu/180/status/start'));
    expect(twice.status.exitstatus).toBe('VM 180 already running');
    // The guest the API started answers SSH with the key set through the API.
    const ssh = await eventually(() => sshExec({ host: '127.0.0.180', port: t.vmSshPort, username: 'ops', privateKey: guestKey.privateKey, command: 'echo up' }), 20_000, 200);
    expect(ssh.stdout.trim()).toBe('up');

    // The guest agent's file-read (PVE::API2::Qemu::Agent), as QemuRun reads a host key.
    const hostKeyFile = { file: '/etc/ssh/ssh_host_ed25519_key.pub' };
    const noAgent = await call('GET', '/nodes/pve1/qemu/180/agent/file-read', hostKeyFile);
    expect([noAgent.status, noAgent.statusMessage]).toEqual([500, 'No QEMU guest agent configured']);
    await call('PUT', '/nodes/pve1/qemu/180/config', { agent: 1 });
    const read = data<{ content: string; 'bytes-read': number }>(await call('GET', '/nodes/pve1/qemu/180/agent/file-read', hostKeyFile));
    expect(read.content).toBe(fs.readFileSync(`${t.cluster.dir}/guests/180/root/etc/ssh/ssh_host_ed25519_key.pub`, 'utf8'));
    expect(read.content).toMatch(/^ssh-ed25519 AAAA\S+ root@vm180\n$/);
    expect(read['bytes-read']).toBe(read.content.length);
    const viaPvesh = await execa('pvesh', ['get', '/nodes/pve1/qemu/180/agent/file-read', '--file', hostKeyFile.file, '--output-format', 'json'], { env: t.cluster.envFor('pve2') });
    expect(JSON.parse(viaPvesh.stdout)).toEqual(read);
    // Agent.pm's checks on 9: PVEAuditor has VM.GuestAgent.Audit (the read-only commands),
    // not .FileRead; 403 names every privilege that would do (check_any).
    const unreadable = await call('GET', '/nodes/pve1/qemu/180/agent/file-read', hostKeyFile, { authorization: auditor.authorization });
    expect([unreadable.status, unreadable.statusMessage]).toEqual([403, 'Permission check failed (/vms/180, VM.GuestAgent.FileRead|VM.GuestAgent.Unrestricted)']);
    const nics = await eventually(async () => {
      const a = await call('GET', '/nodes/pve1/qemu/180/agent/network-get-interfaces', {}, { authorization: auditor.authorization });
      if (a.status !== 200) throw new Error(`${a.status} ${a.statusMessage}`);
      return data<{ result: Array<{ name: string }> }>(a).result;
    }, 20_000, 200);
    expect(nics.map((n) => n.name)).toEqual(['lo', 'eth0']);
    // On 8.4 both want VM.Monitor, which PVEAuditor lacks (it is no Audit privilege).
    await playing(PVE_RELEASES['8.4'], async () => {
      for (const command of ['file-read', 'network-get-interfaces']) {
        const denied = await call('GET', `/nodes/pve1/qemu/180/agent/${command}`, command === 'file-read' ? hostKeyFile : {}, { authorization: auditor.authorization });
        expect([command, denied.status, denied.statusMessage]).toEqual([command, 403, 'Permission check failed (/vms/180, VM.Monitor)']);
      }
    });
    const missing = await call('GET', '/nodes/pve1/qemu/180/agent/file-read', { file: '/../../etc/nope' });
    expect([missing.status, missing.statusMessage]).toEqual([500, "VM 180 qmp command 'guest-file-open' failed - failed to open file '/../../etc/nope' (mode: 'r'): No such file or directory"]);

    const destroyRunning = await call('DELETE', '/nodes/pve1/qemu/180');
    expect([destroyRunning.status, destroyRunning.statusMessage]).toEqual([500, 'VM 180 is running - destroy failed']);
    const offline = await call('POST', '/nodes/pve1/qemu/180/migrate', { target: 'pve2' });
    expect([offline.status, offline.statusMessage]).toEqual([500, "can't migrate running VM without --online"]);

    // A task that logged warnings (log_warn) ends WARNINGS: n, which is no error.
    await t.cluster.injectFault({ command: 'qm shutdown', times: 1, warn: ['guest agent fs-freeze not supported'] });
    const warned = await task(await call('POST', '/nodes/pve1/qemu/180/status/shutdown', { timeout: 20 }));
    expect(warned.status.exitstatus).toBe('WARNINGS: 1');
    expect(warned.log).toEqual(expect.arrayContaining(['WARN: guest agent fs-freeze not supported', 'TASK WARNINGS: 1']));
    expect((await qm('pve1', 'status', '180')).stdout).toBe('status: stopped');
    const reboot = await call('POST', '/nodes/pve1/qemu/180/status/reboot');
    expect([reboot.status, reboot.statusMessage]).toEqual([500, 'VM 180 not running']);
    const agentOff = await call('GET', '/nodes/pve1/qemu/180/agent/file-read', hostKeyFile);
    expect([agentOff.status, agentOff.statusMessage]).toEqual([500, 'VM 180 is not running']);

    const local = await call('POST', '/nodes/pve1/qemu/180/migrate', { target: 'pve1' });
    expect([local.status, local.body?.errors]).toEqual([400, { target: 'target is local node.' }]);
    const migrated = await task(await call('POST', '/nodes/pve1/qemu/180/migrate', { target: 'pve2' }));
    expect(migrated.status).toMatchObject({ type: 'qmigrate', id: '180', exitstatus: 'OK' });
    expect(migrated.log[0]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d starting migration of VM 180 to node 'pve2'/);
    expect(migrated.log.at(-2)).toMatch(/migration finished successfully \(duration \d\d:\d\d:\d\d\)$/);
    expect((await qm('pve2', 'config', '180')).exitCode).toBe(0);
    expect((await call('GET', '/nodes/pve1/qemu/180/config')).status).toBe(500);

    const conf = t.cluster.dir + '/nodes/pve2/qemu-server/180.conf';
    fs.appendFileSync(conf, 'lock: backup\n');
    const locked = await call('PUT', '/nodes/pve2/qemu/180/config', { name: 'renamed' });
    expect([locked.status, locked.statusMessage]).toEqual([500, 'VM is locked (backup)']);
    expect((await task(await call('POST', '/nodes/pve2/qemu/180/status/start'))).status.exitstatus).toBe('VM is locked (backup)');
    expect((await qm('pve2', 'unlock', '180')).exitCode).toBe(0);

    // OVMF without an EFI disk: the start's log_warn makes the task end WARNINGS, no error.
    expect((await call('PUT', '/nodes/pve2/qemu/180/config', { bios: 'ovmf' })).status).toBe(200);
    const ovmf = await task(await call('POST', '/nodes/pve2/qemu/180/status/start'));
    expect(ovmf.status.exitstatus).toBe('WARNINGS: 1');
    expect(ovmf.log).toEqual(expect.arrayContaining(['WARN: no efidisk configured! Using temporary efivars disk.', 'TASK WARNINGS: 1']));
    expect((await task(await call('POST', '/nodes/pve2/qemu/180/status/stop'))).status.exitstatus).toBe('OK');

    const destroyed = await task(await call('DELETE', '/nodes/pve2/qemu/180', { purge: 1, 'destroy-unreferenced-disks': 1 }));
    expect(destroyed.status).toMatchObject({ type: 'qmdestroy', exitstatus: 'OK' });
    expect(destroyed.log).toContain('purging VM 180 from related configurations..');
    expect((await qm('pve2', 'config', '180')).stderr).toBe("Configuration file 'nodes/pve2/qemu-server/180.conf' does not exist");
    const gone = await call('POST', '/nodes/pve2/qemu/180/status/stop');
    expect([gone.status, gone.statusMessage]).toEqual([500, "Configuration file 'nodes/pve2/qemu-server/180.conf' does not exist"]);
  });
});

describe('templates and clones over HTTP', () => {
  test('template and clone are tasks (qmtemplate, qmclone); their early checks answer the request', async () => {
    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 190, ...BASIC, scsi0: 'local-lvm:1', ide2: 'local-lvm:cloudinit' }));
    const tpl = await task(await call('POST', '/nodes/pve1/qemu/190/template'));
    expect(tpl.status).toMatchObject({ type: 'qmtemplate', id: '190', exitstatus: 'OK' });
    expect((await qm('pve1', 'config', '190')).stdout).toMatch(/^scsi0: local-lvm:base-190-disk-0,size=1G$/m);
    const twice = await call('POST', '/nodes/pve1/qemu/190/template');
    expect([twice.status, twice.statusMessage]).toEqual([500, "you can't convert a template to a template"]);

    const linkedWithStorage = await call('POST', '/nodes/pve1/qemu/190/clone', { newid: 191, storage: 'local-lvm' });
    expect([linkedWithStorage.status, linkedWithStorage.statusMessage]).toEqual([500, "parameter 'storage' not allowed for linked clones"]);
    const cloner = t.cluster.createApiToken({ tokenid: 'qemurun@pve!cloner', acl: [{ path: '/vms/190', privs: ['VM.Audit'] }] });
    const denied = await call('POST', '/nodes/pve1/qemu/190/clone', { newid: 191 }, { authorization: cloner.authorization });
    expect([denied.status, denied.statusMessage]).toEqual([403, 'Permission check failed (/vms/190, VM.Clone)']);

    const clone = await task(await call('POST', '/nodes/pve1/qemu/190/clone', { newid: 191, name: 'web-1' }));
    expect(clone.status).toMatchObject({ type: 'qmclone', id: '190', exitstatus: 'OK' });
    expect(clone.log).toContain('create linked clone of drive scsi0 (local-lvm:base-190-disk-0)');
    const conf = (await qm('pve1', 'config', '191')).stdout;
    expect(conf).toMatch(/^scsi0: local-lvm:vm-191-disk-0,size=1G$/m);
    expect(conf).toMatch(/^name: web-1$/m);
    expect(conf).not.toMatch(/^template:/m);
    for (const id of [191, 190]) expect((await task(await call('DELETE', `/nodes/pve1/qemu/${id}`))).status.exitstatus).toBe('OK');
  });

  test("clone asks Datastore.AllocateSpace on every disk's storage, SDN.Use on the bridges and, on 9, Mapping.Use on a custom CPU model", async () => {
    // qemu-server API2/Qemu.pm clone_vm's `$load_and_check`: `$check_storage_access_clone`,
    // check_bridge_access, and (9 only, since 9.1.15) `$check_cpu_model_access`.
    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 194, ...BASIC, scsi0: 'local-lvm:1', ide2: 'local-lvm:cloudinit' }));
    await task(await call('POST', '/nodes/pve1/qemu/194/template'));
    const base = [{ path: '/vms', privs: ['VM.Clone', 'VM.Allocate', 'VM.Audit'] }, { path: '/sdn', privs: ['SDN.Use'] }];
    const elsewhere = t.cluster.createApiToken({ tokenid: 'qemurun@pve!spaceelsewhere', acl: [...base, { path: '/storage/local', privs: ['Datastore.AllocateSpace'] }] });
    const linked = await call('POST', '/nodes/pve1/qemu/194/clone', { newid: 195 }, { authorization: elsewhere.authorization });
    expect([linked.status, linked.statusMessage]).toEqual([403, 'Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)']);
    const noSdn = t.cluster.createApiToken({ tokenid: 'qemurun@pve!clonenosdn', acl: [base[0], { path: '/storage', privs: ['Datastore.AllocateSpace'] }] });
    const bridge = await call('POST', '/nodes/pve1/qemu/194/clone', { newid: 195 }, { authorization: noSdn.authorization });
    expect([bridge.status, bridge.statusMessage]).toEqual([403, 'Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)']);
    expect(await t.cluster.readConfig(195)).toBeUndefined();

    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 196, ...BASIC, cpu: 'custom-tuned' }));
    const cloner = t.cluster.createApiToken({ tokenid: 'qemurun@pve!clonecpu', acl: [...base, { path: '/storage', privs: ['Datastore.AllocateSpace'] }] });
    const cpu = await call('POST', '/nodes/pve1/qemu/196/clone', { newid: 197 }, { authorization: cloner.authorization });
    expect([cpu.status, cpu.statusMessage]).toEqual([403, 'Permission check failed (/mapping/cpu/tuned, Mapping.Use)']);
    await playing(PVE_RELEASES['8.4'], async () => {
      // 8.4's clone_vm does not look at the CPU model.
      expect((await task(await call('POST', '/nodes/pve1/qemu/196/clone', { newid: 197 }, { authorization: cloner.authorization }))).status.exitstatus).toBe('OK');
    });
    for (const id of [197, 196, 194]) expect((await task(await call('DELETE', `/nodes/pve1/qemu/${id}`))).status.exitstatus).toBe('OK');
});

  test("a new id another node holds: the request is answered with a task, which pmxcfs's refused rename fails", async () => {
    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 188, ...BASIC, scsi0: 'local-lvm:1' }));
    await task(await call('POST', '/nodes/pve1/qemu/188/template'));
    expect((await qm('pve2', 'create', '189', '--name', 'elsewhere')).exitCode).toBe(0);
    // clone_vm's early checks look for the config on this node only (API2/Qemu.pm `-f $conffile`).
    const clone = await task(await call('POST', '/nodes/pve1/qemu/188/clone', { newid: 189 }));
    const text = "close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/189.conf' failed: File exists";
    expect(clone.status).toMatchObject({ type: 'qmclone', id: '188', exitstatus: text });
    expect(clone.log.at(-1)).toBe(`TASK ERROR: ${text}`);
    expect((await qm('pve2', 'config', '189')).stdout).toMatch(/^name: elsewhere$/m);
    for (const [node, id] of [['pve2', 189], ['pve1', 188]]) expect((await task(await call('DELETE', `/nodes/${node}/qemu/${id}`))).status.exitstatus).toBe('OK');
  });

  test('the template task writes `template: 1` before it converts the disks: a conversion that fails leaves the flag and the disk as it was', async () => {
    await task(await call('POST', '/nodes/pve1/qemu', { vmid: 192, ...BASIC, scsi0: 'local-lvm:1' }));
    const text = "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout";
    await t.cluster.injectFault({ command: 'qm template 192', at: 'create_base', stderr: text, times: 1 });
    const failed = await task(await call('POST', '/nodes/pve1/qemu/192/template'));
    expect(failed.status).toMatchObject({ type: 'qmtemplate', id: '192', exitstatus: text });
    expect(failed.log.at(-1)).toBe(`TASK ERROR: ${text}`);
    const conf = data<Record<string, string | number>>(await call('GET', '/nodes/pve1/qemu/192/config'));
    expect(conf).toMatchObject({ template: 1, scsi0: 'local-lvm:vm-192-disk-0,size=1G' });
    // A template now: only a disk named is converted.
    const twice = await call('POST', '/nodes/pve1/qemu/192/template');
    expect([twice.status, twice.statusMessage]).toEqual([500, "you can't convert a template to a template"]);
    expect((await task(await call('POST', '/nodes/pve1/qemu/192/template', { disk: 'scsi0' }))).status.exitstatus).toBe('OK');
    expect(data<Record<string, string>>(await call('GET', '/nodes/pve1/qemu/192/config')).scsi0).toBe('local-lvm:base-192-disk-0,size=1G');
    expect((await task(await call('DELETE', '/nodes/pve1/qemu/192'))).status.exitstatus).toBe('OK');
  });
});

describe('tasks', () => {
  test('a task runs on when the API server that started it goes away, and is followed by its UPID', async () => {
    expect((await qm('pve1', 'create', '190', '--name', 'slow')).exitCode).toBe(0);
    await t.cluster.injectFault({ command: 'qm migrate', latencyMs: 1500, times: 1 });
    const started = await call('POST', '/nodes/pve1/qemu/190/migrate', { target: 'pve2' });
    const upid = data<string>(started);
    // Its process leads a session of its own, lowered like the API server (sandbox/priority.ts).
    if (fs.existsSync('/proc/self/autogroup')) {
      const worker = parseInt(UPID.exec(upid)![2], 16);
      expect(fs.readFileSync(`/proc/${worker}/autogroup`, 'utf8')).toMatch(new RegExp(` nice ${os.getPriority() + 10}$`, 'm'));
    }
    await api.stop();
    const second = await startApiServer(sandboxSourceDir(), t.cluster.dir, 'pve1', { authFailureDelayMs: 0 });
    try {
      const follow = (path: string, params = {}) => apiRequest(second, 'GET', `/nodes/pve1/tasks/${encodeURIComponent(upid)}${path}`, params);
      expect(data<TaskStatus>(await follow('/status')).status).toBe('running');
      expect(data<Array<{ upid: string }>>(await apiRequest(second, 'GET', '/nodes/pve1/tasks', { source: 'active' })).map((x) => x.upid)).toContain(upid);
      const done = await eventually(async () => {
        const s = data<TaskStatus>(await follow('/status'));
        if (s.status !== 'stopped') throw new Error('running');
        return s;
      }, 20_000, 100);
      expect(done.exitstatus).toBe('OK');
      const page = await follow('/log', { start: 1, limit: 2 });
      // starting migration..., migration finished..., TASK OK
      expect(page.body!.total).toBe(3);
      expect(data<Array<{ n: number }>>(page).map((l) => l.n)).toEqual([2, 3]);
      expect((await qm('pve2', 'config', '190')).exitCode).toBe(0);
      const migrations = data<unknown[]>(await apiRequest(second, 'GET', '/nodes/pve1/tasks', { typefilter: 'qmigrate', vmid: 190, source: 'all' }));
      expect(migrations).toHaveLength(1);
    } finally {
      api = second;
    }
  });

  test('injected faults hit the API as they hit the CLIs: the pvesh call a request is, the qm command a task is', async () => {
    await t.cluster.injectFault({ command: 'pvesh get /cluster/resources', stderr: 'cluster not ready - no quorum?', times: 1 });
    const failed = await call('GET', '/cluster/resources', { type: 'vm' });
    expect([failed.status, failed.statusMessage]).toEqual([500, 'cluster not ready - no quorum?']);
    expect((await call('GET', '/cluster/resources', { type: 'vm' })).status).toBe(200);
    expect((await qm('pve1', 'create', '195', '--name', 'faulty')).exitCode).toBe(0);
    await t.cluster.injectFault({ command: 'qm start', stderr: 'start failed: QEMU exited with code 1', times: 1 });
    const start = await task(await call('POST', '/nodes/pve1/qemu/195/status/start'));
    expect(start.log).toEqual(['TASK ERROR: start failed: QEMU exited with code 1']);
    expect((await qm('pve1', 'status', '195')).stdout).toBe('status: stopped');
  });

  test('a fault that reads as a parameter error is answered as one: 400 with the errors', async () => {
    expect((await qm('pve1', 'create', '197', '--name', 'param-fault')).exitCode).toBe(0);
    const stderr = '400 Parameter verification failed.\ncores: value must have a minimum value of 1\n';
    await t.cluster.injectFault({ command: 'pvesh set /nodes/pve1/qemu/197/config', stderr, times: 1 });
    const refused = await call('PUT', '/nodes/pve1/qemu/197/config', { cores: 2 });
    expect([refused.status, refused.statusMessage, refused.body]).toEqual([
      400,
      'Parameter verification failed.',
      { data: null, message: 'Parameter verification failed.\n', errors: { cores: 'value must have a minimum value of 1' } },
    ]);
    expect((await qm('pve1', 'config', '197')).stdout).not.toMatch(/^cores:/m);
  });

  test('every answered request is in the request log, with its parameters (the password masked) and task', async () => {
    const from = readApiRequests(t.cluster.dir).length;
    const created = await call('POST', '/nodes/pve1/qemu', { vmid: 198, name: 'logged', cipassword: 'hunter2' });
    await task(created);
    expect((await call('PUT', '/nodes/pve2/qemu/198/config', { cores: 2 })).status).toBe(500);
    const log = readApiRequests(t.cluster.dir)
      .slice(from)
      .filter((r) => !r.path.includes('/tasks/'))
      .map(({ node, method, path, params, status, upid }) => ({ node, method, path, params, status, upid }));
    expect(log).toEqual([
      { node: 'pve1', method: 'POST', path: '/nodes/pve1/qemu', params: { vmid: '198', name: 'logged', cipassword: '**********' }, status: 200, upid: data<string>(created) },
      { node: 'pve2', method: 'PUT', path: '/nodes/pve2/qemu/198/config', params: { cores: '2' }, status: 500, upid: undefined },
    ]);
  });

  test('DELETE on a running task stops it: TASK ERROR: received interrupt', async () => {
    expect((await qm('pve1', 'create', '196', '--name', 'stopped-task')).exitCode).toBe(0);
    await t.cluster.injectFault({ command: 'qm start', latencyMs: 10_000, times: 1 });
    const upid = data<string>(await call('POST', '/nodes/pve1/qemu/196/status/start'));
    const path = `/nodes/pve1/tasks/${encodeURIComponent(upid)}`;
    await eventually(async () => expect(data<Array<{ upid: string }>>(await call('GET', '/nodes/pve1/tasks', { source: 'active' })).map((x) => x.upid)).toContain(upid));
    expect((await call('DELETE', path)).status).toBe(200);
    const { status } = await task({ status: 200, statusMessage: 'OK', body: { data: upid }, fingerprint: '' });
    expect(status.exitstatus).toBe('received interrupt');
    expect((await qm('pve1', 'status', '196')).stdout).toBe('status: stopped');
  });

  test('an unknown UPID and a malformed one are parameter errors', async () => {
    const malformed = await call('GET', '/nodes/pve1/tasks/nonsense/status');
    expect([malformed.status, malformed.body?.errors]).toEqual([400, { upid: 'unable to parse worker upid' }]);
    const unknown = await call('GET', `/nodes/pve1/tasks/${encodeURIComponent('UPID:pve1:00000001:00000001:00000001:qmstart:1:root@pam:')}/status`);
    expect([unknown.status, unknown.body?.errors]).toEqual([400, { upid: 'no such task' }]);
  });
});
