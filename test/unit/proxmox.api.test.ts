import { decodeUpid } from '../../sandbox/api/upid';
import net from 'node:net';
import { ApiNode } from '../../lib/proxmox/api/node';
import { ApiUnreachableError, PveApi, type ApiSettings } from '../../lib/proxmox/api/http';
import { parseUpid } from '../../lib/proxmox/api/tasks';
import { PermissionDeniedError, ParameterError, StorageError, VmLockedError, VmNotFoundError, VmidTakenError } from '../../lib/proxmox/errors';
import { nodeImageName, versionAtLeast, ensureImageOnNode, NodeTooOldError } from '../../lib/images/onNode';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fakeUpid, startPveApiStub, stubTask, type PveApiStub } from '../support/pveApiStub';
import { startImageServer } from '../support/imageServer';

const TOKEN = 'qemurun@pve!test=8f6c2b9e-3d41-4a57-9b0e-5e2d6f1a7c33';

let stub: PveApiStub;
const apis: PveApi[] = [];

function api(settings: Partial<ApiSettings> = {}): PveApi {
  const a = new PveApi({ urls: [stub.url], token: TOKEN, fingerprint: stub.fingerprint, ...settings });
  apis.push(a);
  return a;
}

function node(settings: Partial<ApiSettings> = {}): ApiNode {
  return new ApiNode(api(settings), 'pve1', { pollMs: 10 });
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

beforeAll(async () => {
  stub = await startPveApiStub();
  stub.route('GET /version', () => ({ data: { version: '8.4.1', release: '8.4', repoid: '2a5fa54a' } }));
  stub.route('GET /nodes/pve1/version', () => ({ data: { version: '8.4.1', release: '8.4', repoid: '2a5fa54a' } }));
});

afterEach(() => {
  stub.requests.length = 0;
});

afterAll(async () => {
  for (const a of apis) a.close();
  await stub.close();
});

describe('trust', () => {
  test('a pinned fingerprint is accepted in either spelling, and the token goes in a PVEAPIToken header', async () => {
    await expect(node().version()).resolves.toMatchObject({ version: '8.4.1' });
    await expect(node({ fingerprint: stub.fingerprint.replace(/:/g, '').toLowerCase() }).version()).resolves.toMatchObject({ version: '8.4.1' });
    expect(stub.requests.map((r) => r.authorization)).toEqual([`PVEAPIToken=${TOKEN}`, `PVEAPIToken=${TOKEN}`]);
  });

  test('a certificate that is not the pinned one is refused before the token is sent', async () => {
    const wrong = 'AB:'.repeat(31) + 'AB';
    const err = await node({ fingerprint: wrong }).version().catch((e: Error) => e);
    expect(err).toBeInstanceOf(ApiUnreachableError);
    expect((err as Error).message).toMatch(/not the pinned PROXMOX_API_FINGERPRINT/);
    expect((err as Error).message).not.toContain(TOKEN.split('=')[1]);
    expect(stub.requests).toHaveLength(0);
  });

  test('one pin per URL: each node is checked against its own, and a renewed one is named with what to do', async () => {
    const second = await startPveApiStub();
    try {
      second.route('GET /nodes/pve1/version', () => ({ data: { version: '8.4.1', release: '8.4' } }));
      const renewed = 'AB:'.repeat(31) + 'AB';
      // The first node's certificate changed (its pin is stale); the second's pin holds.
      const api = new PveApi({ urls: [stub.url, second.url], token: TOKEN, fingerprint: [renewed, stub.fingerprint] });
      apis.push(api);
      await expect(new ApiNode(api, 'pve1').version()).resolves.toMatchObject({ version: '8.4.1' });
      expect(stub.requests).toEqual([]);
      expect(second.requests).toHaveLength(1);
      // Both stale: each refusal names its URL, its place in the list, and the way out.
      const stale = new PveApi({ urls: [stub.url, second.url], token: TOKEN, fingerprint: [renewed, renewed] });
      apis.push(stale);
      const err = await new ApiNode(stale, 'pve1').version().catch((e: Error) => e);
      expect((err as Error).message).toContain(`PROXMOX_API_FINGERPRINT for ${new URL(stub.url).origin} (1st of 2)`);
      expect((err as Error).message).toContain(`PROXMOX_API_FINGERPRINT for ${new URL(second.url).origin} (2nd of 2)`);
      expect((err as Error).message).toMatch(/certificate fingerprint [0-9A-F:]{95} .*pin the new one \(pvenode cert info\) or trust the cluster's CA \(PROXMOX_API_CA_FILE\)/);
      expect(() => new PveApi({ urls: [stub.url, second.url, stub.url], token: TOKEN, fingerprint: [renewed, renewed] })).toThrow(/2 fingerprints for 3 URLs/);
    } finally {
      await second.close();
    }
  });

  test('the CA file trusts the certificate; without it (system CAs) a self-signed one is refused', async () => {
    await expect(node({ fingerprint: undefined, ca: stub.certPem }).version()).resolves.toMatchObject({ version: '8.4.1' });
    await expect(node({ fingerprint: undefined }).version()).rejects.toThrow(/self-signed|self signed/);
    expect(stub.requests).toHaveLength(1);
  });

  test('insecure accepts any certificate', async () => {
    await expect(node({ fingerprint: undefined, insecure: true }).version()).resolves.toMatchObject({ version: '8.4.1' });
  });
});

describe('failover', () => {
  test('an unreachable URL is skipped for the next, which is then tried first', async () => {
    const dead = `https://127.0.0.1:${await closedPort()}`;
    const a = api({ urls: [dead, stub.url] });
    await expect(new ApiNode(a, 'pve1').version()).resolves.toMatchObject({ version: '8.4.1' });
    expect(a.endpoints).toEqual([stub.url, dead]);
  });

  test('no URL reachable: a retryable error naming each', async () => {
    const dead1 = `https://127.0.0.1:${await closedPort()}`;
    const dead2 = `https://127.0.0.1:${await closedPort()}`;
    const err = await new ApiNode(api({ urls: [dead1, dead2] }), 'pve1').version().catch((e: Error) => e);
    expect(err).toBeInstanceOf(ApiUnreachableError);
    expect((err as Error).message).toContain(dead1);
    expect((err as Error).message).toContain(dead2);
  });
});

describe('errors map to the CLI mode failure types', () => {
  test('403: PermissionDeniedError, non-retryable, naming the privilege and the path', async () => {
    stub.route('POST /nodes/pve1/qemu', () => ({ status: 403, message: 'Permission check failed (/vms/120, VM.Allocate)' }));
    const err = await node().createVm(120, { name: 'x' }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect((err as PermissionDeniedError).retryable).toBe(false);
    expect((err as PermissionDeniedError).missing).toEqual({ path: '/vms/120', privilege: 'VM.Allocate' });
    expect((err as Error).message).toBe("POST /nodes/pve1/qemu failed on node 'pve1' (HTTP 403): 403 Permission check failed (/vms/120, VM.Allocate)");
  });

  test('a 403 that names no privilege (create_vm) gets the one the call needs', async () => {
    stub.route('POST /nodes/pve1/qemu', () => ({ status: 403, message: 'Permission check failed' }));
    const err = await node().createVm(150, { name: 'x' }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect((err as PermissionDeniedError).missing).toEqual({ path: '/vms/150', privilege: 'VM.Allocate' });
    expect((err as Error).message).toContain('403 Permission check failed; the token lacks VM.Allocate on /vms/150');
  });

  test("create_vm with a pool: `pool` in the request; a missing pool (check_pool_exist's 403) fails for good", async () => {
    stub.route('POST /nodes/pve1/qemu', (req) =>
      req.form.get('pool') === 'lab' ? { data: null } : { status: 403, message: `Permission check failed (pool '${req.form.get('pool')}' does not exist)` },
    );
    const err = await node().createVm(120, { name: 'x', pool: 'nope' }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect((err as PermissionDeniedError).retryable).toBe(false);
    expect((err as Error).message).toContain("pool 'nope' does not exist");
    expect(stub.requests.at(-1)?.form.get('pool')).toBe('nope');
  });

  test('401: a bad token is PermissionDeniedError too', async () => {
    stub.route('GET /cluster/nextid', () => ({ status: 401, message: 'authentication failure' }));
    await expect(node().nextId()).rejects.toBeInstanceOf(PermissionDeniedError);
  });

  test('what no retry heals fails at once, with what to do: a revoked token, a storage without import, an unknown storage', async () => {
    // As pveproxy answers a token verify_token refuses: the reason phrase, no body.
    stub.route('GET /cluster/nextid', () => ({ status: 401, message: 'Authentication failed!' }));
    const revoked = await node().nextId().catch((e: Error) => e);
    expect(revoked).toBeInstanceOf(PermissionDeniedError);
    expect((revoked as PermissionDeniedError).retryable).toBe(false);
    expect((revoked as Error).message).toMatch(/HTTP 401.*Authentication failed!.*to fix: .*PROXMOX_API_TOKEN/);

    stub.route('POST /nodes/pve1/storage/local/download-url', () => ({ status: 500, message: "storage 'local' is not configured for content-type 'import'" }));
    const noImport = await node()
      .downloadUrl('local', { url: 'https://example.invalid/x.qcow2', filename: 'x.qcow2', content: 'import' })
      .catch((e: Error) => e);
    expect(noImport).toBeInstanceOf(StorageError);
    expect((noImport as StorageError).retryable).toBe(false);
    expect((noImport as Error).message).toMatch(/to fix: allow content 'import' on storage 'local'.*PROXMOX_IMAGE_STORAGE/);

    stub.route('GET /nodes/pve1/storage/nope/status', () => ({ status: 400, message: 'Parameter verification failed.', errors: { storage: 'No such storage.' } }));
    const unknown = await node().storageStatus({ storage: 'nope' }).catch((e: Error) => e);
    expect(unknown).toBeInstanceOf(StorageError);
    expect((unknown as Error).message).toMatch(/storage: No such storage\..*to fix: storage 'nope' does not exist on that node: check ASSIGN_STORAGE/);
  });

  test("the guest agent's 403 names the release's privilege, and the to fix: gives the role that release's", async () => {
    // Proxmox VE 9 (qemu-server Agent.pm, RPCEnvironment check_any): any one of two.
    stub.route('GET /nodes/pve1/qemu/120/agent/network-get-interfaces', () => ({ status: 403, message: 'Permission check failed (/vms/120, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)' }));
    const nine = await node().agentNetworkInterfaces(120).catch((e: Error) => e);
    expect(nine).toBeInstanceOf(PermissionDeniedError);
    expect((nine as PermissionDeniedError).missing).toEqual({ path: '/vms/120', privilege: 'VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted' });
    expect((nine as Error).message).toMatch(/to fix: give the token's role VM\.GuestAgent\.Audit and VM\.GuestAgent\.FileRead.*--privs VM\.GuestAgent\.Audit,VM\.GuestAgent\.FileRead --append 1/);
    // 8.4: VM.Monitor.
    stub.route('GET /nodes/pve1/qemu/120/agent/file-read', () => ({ status: 403, message: 'Permission check failed (/vms/120, VM.Monitor)' }));
    const eight = await node().agentFileRead(120, '/etc/ssh/ssh_host_ed25519_key.pub').catch((e: Error) => e);
    expect((eight as Error).message).toMatch(/to fix: give the token's role VM\.Monitor, Proxmox VE 8's guest agent privilege: pveum role modify <role> --privs VM\.Monitor --append 1/);
  });

  test('a task that ends WARNINGS: n succeeded (PVE::Tools::upid_status_is_error)', async () => {
    const upid = fakeUpid('pve1', 'qmstart', '120');
    stub.route('POST /nodes/pve1/qemu/120/status/start', () => ({ data: upid }));
    stubTask(stub, upid, ['WARN: no efidisk configured! Using temporary efivars disk.', 'TASK WARNINGS: 1'], 'WARNINGS: 1', 1);
    await expect(node().start(120)).resolves.not.toThrow();
  });

  test('a resize refused with no privilege named: both privileges it needs are named', async () => {
    stub.route('PUT /nodes/pve1/qemu/120/resize', () => ({ status: 403, message: 'Permission check failed' }));
    const err = await node().resize(120, 'scsi0', '+2G').catch((e: Error) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect((err as Error).message).toMatch(/VM\.Config\.Disk.*Datastore\.AllocateSpace/);
  });

  test('VMID taken, locked, not found, bad parameter', async () => {
    stub.route('POST /nodes/pve1/qemu', () => ({ status: 500, message: "unable to create VM 120 - VM 120 already exists on node 'pve2'" }));
    const taken = await node().createVm(120, {}).catch((e: Error) => e);
    expect(taken).toBeInstanceOf(VmidTakenError);
    expect((taken as VmidTakenError).ownerNode).toBe('pve2');

    stub.route('PUT /nodes/pve1/qemu/120/config', () => ({ status: 500, message: 'VM is locked (migrate)' }));
    const locked = await node().setVmOptions(120, { cores: 2 }).catch((e: Error) => e);
    expect(locked).toBeInstanceOf(VmLockedError);
    expect((locked as VmLockedError).retryable).toBe(true);
    expect((locked as VmLockedError).lock).toBe('migrate');

    stub.route('GET /nodes/pve1/qemu/999/config', () => ({ status: 500, message: "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist" }));
    await expect(node().config(999)).rejects.toBeInstanceOf(VmNotFoundError);

    stub.route('PUT /nodes/pve1/qemu/120/resize', () => ({ status: 400, message: 'Parameter verification failed.', errors: { size: 'invalid format - size: unable to parse' } }));
    const bad = await node().resize(120, 'scsi0', 'big').catch((e: Error) => e);
    expect(bad).toBeInstanceOf(ParameterError);
    expect((bad as Error).message).toContain('size: invalid format');
  });
});

describe('tasks', () => {
  test('a create waits for its task; a failed task is the error class of its exit status', async () => {
    const upid = fakeUpid('pve1', 'qmcreate', '120');
    stub.route('POST /nodes/pve1/qemu', () => ({ data: upid }));
    const task = stubTask(stub, upid, ['creating VM'], 'OK', 2);
    const seen: string[] = [];
    await node().createVm(120, { name: 'web', cores: 2, numa: true }, { onTask: (u) => seen.push(u) });
    expect(seen).toEqual([upid]);
    expect(task.statusReads()).toBe(3);
    const post = stub.requests.find((r) => r.method === 'POST')!;
    expect(Object.fromEntries(post.form)).toEqual({ vmid: '120', name: 'web', cores: '2', numa: '1' });

    const start = fakeUpid('pve1', 'qmstart', '120');
    stub.route('POST /nodes/pve1/qemu/120/status/start', () => ({ data: start }));
    stubTask(stub, start, [], 'VM 120 already running', 0);
    await expect(node().start(120)).resolves.toBe('already-running');
  });

  test('a migration streams its log lines and reports the duration', async () => {
    const upid = fakeUpid('pve1', 'qmigrate', '120');
    stub.route('POST /nodes/pve1/qemu/120/migrate', () => ({ data: upid }));
    const lines = [
      '2026-12-01 06:00:00 starting migration of VM 120 to node \'pve2\' (10.0.0.12)',
      '2026-12-01 06:00:03 migration finished successfully (duration 00:01:05)',
    ];
    stubTask(stub, upid, lines, 'OK', 3);
    const got: string[] = [];
    const result = await node().migrate(120, 'pve2', { withLocalDisks: true, onLine: (l) => got.push(l) });
    expect(got).toEqual(lines);
    expect(result).toEqual({ durationSec: 65 });
    expect(Object.fromEntries(stub.requests.find((r) => r.method === 'POST')!.form)).toEqual({ target: 'pve2', 'with-local-disks': '1' });
  });

  test('a task log not written yet, which PVE answers as the one line "no content", costs no line', async () => {
    const upid = fakeUpid('pve1', 'qmigrate', '123');
    stub.route('POST /nodes/pve1/qemu/123/migrate', () => ({ data: upid }));
    const lines = ["starting migration of VM 123 to node 'pve2' (10.0.0.12)", 'migration finished successfully (duration 00:00:02)'];
    let reads = 0;
    stub.route(`GET /nodes/pve1/tasks/${upid}/status`, () => ({ data: ++reads > 2 ? { status: 'stopped', exitstatus: 'OK', upid } : { status: 'running', upid } }));
    stub.route(`GET /nodes/pve1/tasks/${upid}/log`, (req) => {
      const written = reads > 2 ? [...lines, 'TASK OK'] : reads > 1 ? lines.slice(0, 1) : [];
      // PVE::Tools::dump_logfile: an empty file reads as one line.
      if (written.length === 0) return { data: [{ n: 1, t: 'no content' }], total: 1 };
      const start = Number(req.query.get('start') ?? 0);
      return { data: written.slice(start).map((t, i) => ({ n: start + i + 1, t })), total: written.length };
    });
    const got: string[] = [];
    await node().migrate(123, 'pve2', { onLine: (l) => got.push(l) });
    expect(got).toEqual(lines);
  });

  test('a recorded task is followed, not started again; a recorded failed one is started anew', async () => {
    const running = fakeUpid('pve1', 'qmigrate', '121');
    stubTask(stub, running, ['copying disk'], 'OK', 2);
    let posts = 0;
    stub.route('POST /nodes/pve1/qemu/121/migrate', () => {
      posts++;
      return { data: fakeUpid('pve1', 'qmigrate', '121') };
    });
    const got: string[] = [];
    await node().migrate(121, 'pve2', { resumeTask: running, onLine: (l) => got.push(l) });
    expect(posts).toBe(0);
    expect(got).toEqual(['copying disk']);

    const failed = fakeUpid('pve1', 'qmigrate', '121');
    stubTask(stub, failed, [], 'migration aborted', 0);
    const fresh = fakeUpid('pve1', 'qmigrate', '121');
    stub.route('POST /nodes/pve1/qemu/121/migrate', () => {
      posts++;
      return { data: fresh };
    });
    stubTask(stub, fresh, [], 'OK', 0);
    await node().migrate(121, 'pve2', { resumeTask: failed });
    expect(posts).toBe(1);
  });

  test('skiplock, root@pam\'s alone, is never sent with a token', async () => {
    const upid = fakeUpid('pve1', 'qmdestroy', '122');
    stub.route('DELETE /nodes/pve1/qemu/122', () => ({ data: upid }));
    stubTask(stub, upid, [], 'OK', 0);
    await node().destroy(122, { purge: true, skiplock: true });
    const del = stub.requests.find((r) => r.method === 'DELETE')!;
    expect(Object.fromEntries(del.query)).toEqual({ purge: '1' });
  });

  test('UPIDs carry their node', () => {
    expect(parseUpid('UPID:pve2:0000ABCD:0001E240:6751A2B3:qmigrate:120:root@pam:')).toEqual({ node: 'pve2', type: 'qmigrate', id: '120' });
    expect(parseUpid('not-a-upid')).toBeUndefined();
  });

  test("a UPID's pstart has 8 or 9 hex digits, as PVE::Tools::upid_decode allows; pid and starttime 8", () => {
    // A node up for more than 497 days: pstart (clock ticks since boot) outgrows 32 bits.
    const long = 'UPID:pve1:002F2C7D:1A2B3C4D5:6751A2B3:download:debian-12.qcow2:qemurun@pve!service:';
    expect(parseUpid(long)).toEqual({ node: 'pve1', type: 'download', id: 'debian-12.qcow2' });
    expect(decodeUpid(long)?.pstart).toBe(0x1a2b3c4d5);
    for (const bad of [
      'UPID:pve1:002F2C7D:1A2B3C4D56:6751A2B3:download:x:root@pam:', // pstart of 10 digits
      'UPID:pve1:002F2C7D:1A2B3C4D:6751A2B30:download:x:root@pam:', // starttime of 9
      'UPID:pve1:02F2C7D:1A2B3C4D:6751A2B3:download:x:root@pam:', // pid of 7
      'UPID:pve1:002F2C7D:1A2B3C4D:6751A2B3:download:x::', // no user
    ]) {
      expect([bad, parseUpid(bad)]).toEqual([bad, undefined]);
      expect([bad, decodeUpid(bad)]).toEqual([bad, undefined]);
    }
  });
});

describe('secrets and shapes', () => {
  test('new disks (scsi1, efidisk0) go in the config PUT in the new-disk syntax, machine and bios in create_vm', async () => {
    stub.route('PUT /nodes/pve1/qemu/120/config', () => ({ data: null }));
    stub.route('POST /nodes/pve1/qemu', () => ({ data: null }));
    await node().createVm(120, { name: 'x', machine: 'q35', bios: 'ovmf' });
    await node().setVmOptions(120, { efidisk0: 'local-lvm:1,efitype=4m,pre-enrolled-keys=0' });
    await node().setVmOptions(120, { scsi1: 'local-lvm:32' });
    const [create, efi, scsi1] = stub.requests.filter((r) => r.method !== 'GET');
    expect([create.form.get('machine'), create.form.get('bios')]).toEqual(['q35', 'ovmf']);
    expect(efi.form.get('efidisk0')).toBe('local-lvm:1,efitype=4m,pre-enrolled-keys=0');
    expect(scsi1.form.get('scsi1')).toBe('local-lvm:32');
  });

  test('sshkeys travel URI-encoded, the password only as its crypt hash', async () => {
    stub.route('PUT /nodes/pve1/qemu/120/config', () => ({ data: null }));
    await node().setVmOptions(120, { sshkeys: 'ssh-ed25519 AAAA a@b\nssh-rsa BBBB c@d\n', cipassword: 'hunter2 hunter2', ciuser: 'debian' });
    const form = stub.requests[0].form;
    expect(form.get('sshkeys')).toBe('ssh-ed25519%20AAAA%20a%40b%0Assh-rsa%20BBBB%20c%40d%0A');
    expect(form.get('cipassword')).toMatch(/^\$5\$[^$]+\$[./0-9A-Za-z]{43}$/);
    expect(stub.requests.map((r) => r.form.toString()).join('')).not.toContain('hunter2');
  });

  test('a config as the API answers it and as qm config prints it are one VmConfig', async () => {
    // test/fixtures/proxmox/qm-config-description.txt, as GET .../config answers it: numbers
    // as JSON numbers or strings, the description plain, sshkeys escaped as stored, a digest.
    const sshkeys = '%0Assh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIGx%2Bk%3D%20root%40pve1%0Assh-rsa%20AAAAB3Nza%2F%3D%20user%40laptop%0A';
    stub.route('GET /nodes/pve1/qemu/120/config', () => ({
      data: {
        boot: 'order=scsi0',
        cores: 2,
        cpu: 'x86-64-v2-AES',
        description: 'qemurun-owner: wf-123\nspec: {"os":"debian"}\n名前 ✓',
        digest: '5f1c0e8a9b7d6c4e3f2a1b0c9d8e7f6a5b4c3d2e',
        ide2: 'local-lvm:vm-120-cloudinit,media=cdrom',
        lock: 'migrate',
        memory: '2048',
        name: 'web-120',
        scsi0: 'local-lvm:vm-120-disk-0,size=2252M',
        sshkeys,
        tags: 'debian;qemurun',
        unused0: 'local-lvm:vm-120-disk-1',
      },
    }));
    const text = readFileSync(path.join(__dirname, '..', 'fixtures', 'proxmox', 'qm-config-description.txt'), 'utf8');
    const fromApi = await node().config(120);
    expect(fromApi).toEqual(parseVmConfig(text));
    expect(fromApi).toMatchObject({ cores: 2, memory: 2048, description: 'qemurun-owner: wf-123\nspec: {"os":"debian"}\n名前 ✓' });
    expect(fromApi.entries).toMatchObject({ cores: '2', sshkeys, description: fromApi.description });
    expect(fromApi.entries.digest).toBeUndefined();
  });

  test('config, status, storage and resources read into the same types as the CLI', async () => {
    stub.route('GET /nodes/pve1/qemu/120/config', () => ({
      data: { name: 'web-120', cores: 2, memory: '2048', scsi0: 'local-lvm:vm-120-disk-0,size=16G', description: 'qemurun-owner=x\nline two', digest: 'abc' },
    }));
    const conf = await node().config(120);
    expect(conf).toMatchObject({ name: 'web-120', cores: 2, memory: 2048, description: 'qemurun-owner=x\nline two' });
    expect(conf.disks).toEqual([{ key: 'scsi0', volid: 'local-lvm:vm-120-disk-0', options: { size: '16G' }, sizeBytes: 16 * 1024 ** 3, cdrom: false }]);

    stub.route('GET /nodes/pve1/qemu/120/status/current', () => ({ data: { status: 'running', qmpstatus: 'running', vmid: 120 } }));
    await expect(node().status(120)).resolves.toBe('running');

    stub.route('GET /nodes/pve1/storage', () => ({
      data: [{ storage: 'local', type: 'dir', active: 1, enabled: 1, total: 100 * 1024 ** 3, used: 25 * 1024 ** 3, avail: 75 * 1024 ** 3, content: 'iso,import' }],
    }));
    await expect(node().storageStatus()).resolves.toEqual([
      { name: 'local', type: 'dir', status: 'active', totalBytes: 100 * 1024 ** 3, usedBytes: 25 * 1024 ** 3, availableBytes: 75 * 1024 ** 3, usedPercent: 25 },
    ]);

    stub.route('GET /cluster/resources', () => ({
      data: [
        { id: 'qemu/120', type: 'qemu', vmid: 120, node: 'pve2', status: 'running', name: 'web-120', maxcpu: 2 },
        { id: 'node/pve1', type: 'node', node: 'pve1', status: 'online', maxcpu: 8 },
      ],
    }));
    const all = await node().resources();
    expect(all.vm.map((v) => [v.vmid, v.node])).toEqual([[120, 'pve2']]);
    expect(all.node.map((n) => n.node)).toEqual(['pve1']);
  });
});

describe('images fetched by the node', () => {
  let images: Awaited<ReturnType<typeof startImageServer>>;
  beforeAll(async () => {
    images = await startImageServer();
  });
  afterAll(async () => {
    await images.stop();
  });

  const source = () => ({
    url: `${images.baseUrls.debian}/bookworm/latest/debian-12-generic-amd64.qcow2`,
    fileName: 'debian-12-generic-amd64.qcow2',
    checksumUrl: `${images.baseUrls.debian}/bookworm/latest/SHA512SUMS`,
    algorithm: 'sha512' as const,
  });

  test('download-url with the published checksum once; the same release is found on the storage after', async () => {
    const upid = fakeUpid('pve1', 'download', 'local');
    let stored: string[] = [];
    stub.route('GET /nodes/pve1/storage/local/content', () => ({ data: stored.map((volid) => ({ volid, content: 'import', format: 'qcow2' })) }));
    stub.route('POST /nodes/pve1/storage/local/download-url', (req) => {
      stored = [`local:import/${req.form.get('filename')}`];
      return { data: upid };
    });
    stubTask(stub, upid, ['downloading ...', 'download of ... finished'], 'OK', 1);
    const first = await ensureImageOnNode(node(), 'local', source());
    expect(first.downloaded).toBe(true);
    expect(first.volid).toMatch(/^local:import\/debian-12-generic-amd64-[0-9a-f]{12}\.qcow2$/);
    const post = stub.requests.find((r) => r.method === 'POST')!;
    expect(post.form.get('content')).toBe('import');
    expect(post.form.get('checksum-algorithm')).toBe('sha512');
    expect(post.form.get('checksum')).toMatch(/^[0-9a-f]{128}$/);
    expect(post.form.get('url')).toBe(source().url);

    const again = await ensureImageOnNode(node(), 'local', source());
    expect(again).toEqual({ ...first, downloaded: false });
    expect(stub.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  test('a node older than 8.4 is refused, naming it, its version and what to do, whatever node serves the API', async () => {
    const old = new PveApi({ urls: [stub.url], token: TOKEN, fingerprint: stub.fingerprint });
    apis.push(old);
    // The node behind PROXMOX_API_URL runs 8.4 (/version); pve1, where the image goes, 8.3.
    stub.route('GET /nodes/pve1/version', () => ({ data: { version: '8.3.2', release: '8.3' } }));
    try {
      const err = await ensureImageOnNode(new ApiNode(old, 'pve1'), 'local', source()).catch((e: Error) => e);
      expect(err).toBeInstanceOf(NodeTooOldError);
      expect((err as Error).message).toMatch(/node 'pve1' runs Proxmox VE 8\.3\.2.*8\.4 or later.*CLI mode/);
      expect(stub.requests.map((r) => `${r.method} ${r.path}`)).toContain('GET /nodes/pve1/version');
    } finally {
      stub.route('GET /nodes/pve1/version', () => ({ data: { version: '8.4.1', release: '8.4' } }));
    }
  });

  test('names and versions', () => {
    expect(nodeImageName({ ...source(), fileName: 'ubuntu-24.04-server-cloudimg-amd64.img' }, 'ab'.repeat(32))).toBe('ubuntu-24.04-server-cloudimg-amd64-abababababab.qcow2');
    expect(versionAtLeast('8.4.1', [8, 4])).toBe(true);
    expect(versionAtLeast('9.0', [8, 4])).toBe(true);
    expect(versionAtLeast('8.3.9', [8, 4])).toBe(false);
  });
});
