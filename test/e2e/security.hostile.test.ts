import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { generateEd25519 } from '../../sandbox/sshKeys';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';
import { send, sendRaw, RawAnswer } from '../support/securityHttp';
import { SshExecutor } from '../../lib/executor/ssh';
import { CliNode } from '../../lib/proxmox/cli';
import { expectRootPasswordSetAsHash } from '../support/rootPassword';

/**
 * Hostile strings in every string an API caller controls: body fields, URL parameters,
 * query strings and headers. Each one is either refused (400 naming the field, 404 for an
 * unknown id, 413/431 when too large) before anything runs, or it arrives as one literal
 * value: a password is stored as its hash and the hash verifies, a key comment lands in
 * authorized_keys byte for byte. No canary file is ever created, on this host (where the
 * main node's commands run as local processes and pve2's through its sshd) or inside any
 * guest. Both executors carry accepted hostile values: an install on pve1 (local), one
 * that ends on pve2 (SSH for its start, status and reboot), and qm calls made straight
 * through the SSH executor with every hostile value as an argument.
 */

const RUN = crypto.randomBytes(4).toString('hex');
const CANARY_PREFIX = `qr-canary-${RUN}`;
const canary = (tag: string) => `/tmp/${CANARY_PREFIX}-${tag}`;
const UNKNOWN_VMID = 199;

/** The hostile set; `tag` makes every canary path unique to where the value was used. */
function hostile(tag: string): Array<[label: string, value: string]> {
  return [
    ['$(...)', `$(touch ${canary(`${tag}-s`)})`],
    ['; touch', `;touch ${canary(`${tag}-c`)}`],
    ['&& touch', `&& touch ${canary(`${tag}-a`)}`],
    ['backticks', `\`touch ${canary(`${tag}-b`)}\``],
    ['single quotes', `'; touch ${canary(`${tag}-q`)}; '`],
    ['double quotes', `"; touch ${canary(`${tag}-d`)}; "`],
    ['newline', `x\ntouch ${canary(`${tag}-n`)}\n`],
    ['NUL', `x\u0000touch ${canary(`${tag}-z`)}`],
    ['100 KB', 'A'.repeat(100 * 1024)],
    ['unicode', '名前✓'],
    ['RTL marks', '\u202eevil\u202c\u200f'],
    ['--purge', '--purge'],
    ['-rf', '-rf'],
    ['../../etc/passwd', '../../etc/passwd'],
  ];
}

/** What the install body accepts as a password (README): 1-128 printable ASCII characters. */
const PRINTABLE_PASSWD = /^[\x20-\x7e]{1,128}$/;
const ROOT_PASSWORD = `r'o"o\`touch ${canary('root-b')}\`$(touch ${canary('root-s')});x`;

let h: Harness;
const JSON_CT = { 'Content-Type': 'application/json' };

beforeAll(async () => {
  h = await startHarness({ VM_ROOT_PASSWORD: ROOT_PASSWORD });
});

afterAll(async () => {
  await h?.stop();
});

// ---- checks ---------------------------------------------------------------------------

/** Every file under `dir` (no symlinks followed) whose name starts with the canary prefix. */
function canariesUnder(dir: string): string[] {
  const found: string[] = [];
  const stack = [dir];
  while (stack.length > 0) {
    const d = stack.pop()!;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.name.startsWith(CANARY_PREFIX)) found.push(p);
      if (e.isDirectory() && !e.isSymbolicLink()) stack.push(p);
    }
  }
  return found;
}

/** No canary on this host's /tmp (main node and pve2's sshd both run here), nor in any guest. */
function expectNoCanary(): void {
  const onHost = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(CANARY_PREFIX));
  if (os.tmpdir() !== '/tmp') onHost.push(...fs.readdirSync('/tmp').filter((n) => n.startsWith(CANARY_PREFIX)));
  const inGuests = canariesUnder(path.join(h.sandbox.dir, 'guests'));
  expect({ onHost, inGuests }).toEqual({ onHost: [], inGuests: [] });
}

/** A refusal: the given status, JSON, success false, a message naming `field`. */
function expectRefused(a: RawAnswer, value: string, field: string | RegExp, statuses = [400]): void {
  const allowed = value.length > 60_000 ? [413, 431, ...statuses] : statuses;
  const seen = { status: a.status, body: a.text.slice(0, 200) };
  expect({ ...seen, ok: allowed.includes(a.status) }).toMatchObject({ ok: true });
  expect(a.headers['content-type']).toMatch(/^application\/json/);
  expect(a.json).toMatchObject({ success: false, message: expect.any(String) });
  if (a.status === 400 || a.status === 404) {
    expect(a.json!.message).toMatch(field instanceof RegExp ? field : new RegExp(field.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')));
  }
}

const enc = encodeURIComponent;

/** Sends a request whose header or path an HTTP client would refuse (NUL, CR/LF, raw UTF-8). */
function rawRequest(method: string, target: string, headers: Record<string, string>, body?: string): Promise<RawAnswer> {
  const head = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (body !== undefined) head.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return sendRaw(h.service.url, Buffer.from(`${head.join('\r\n')}\r\n\r\n${body ?? ''}`, 'utf8'));
}

const sendable = (v: string) => /^[\x20-\x7e]*$/.test(v) && v.length < 8000;

async function workflowCount(): Promise<number> {
  return (await h.service.client.workflow.count(`TaskQueue = '${h.config.temporal.taskQueue}'`)).count;
}

async function opensslSha256Crypt(password: string, salt: string): Promise<string> {
  // argv straight to execve, and `--`: openssl gets the password as one literal argument
  // even when it starts with a dash (without `--`, openssl itself reads `--purge` as an option).
  return (await execa('openssl', ['passwd', '-5', '-salt', salt, '--', password])).stdout;
}

async function expectCipasswordOf(vmid: number, password: string): Promise<void> {
  const conf = (await h.sandbox.readConfig(vmid))!;
  const m = /^cipassword: (\$5\$([^$]+)\$\S+)$/m.exec(conf);
  expect(m).not.toBeNull();
  expect(await opensslSha256Crypt(password, m![2])).toBe(m![1]);
}

// ---- install body fields --------------------------------------------------------------

const INSTALL_FIELDS = ['os', 'version', 'name', 'node', 'disk', 'user', 'passwd', 'pubkey'] as const;

describe('install body: every string field, every hostile value, refused before anything runs', () => {
  const cases = INSTALL_FIELDS.flatMap((field) =>
    hostile(`body-${field}`)
      // Printable passwords are valid: they are proven literal by the installs below.
      .filter(([, v]) => !(field === 'passwd' && PRINTABLE_PASSWD.test(v)))
      .map(([label, value]) => [field, label, value] as const),
  );

  test.each(cases)('%s = %s', async (field, _label, value) => {
    const body = field === 'os' ? { os: value, version: '12' } : { os: 'debian', version: '12', [field]: value };
    const a = await send(h.service.url, { path: '/api/vm/install', headers: JSON_CT, body: JSON.stringify(body) });
    expectRefused(a, value, field);
  });

  test('none of them started a workflow or reached qm; no canary anywhere', async () => {
    expect(await workflowCount()).toBe(0);
    expect((await h.sandbox.calls()).filter((c) => c.argv[0] === 'qm')).toEqual([]);
    expectNoCanary();
  });
});

// ---- accepted hostile values, end to end ----------------------------------------------

interface Installed {
  res: SseResponse;
  vmid: number;
  passwd: string;
  key: string;
}

describe('accepted hostile values travel through installs as literal values', () => {
  const userKey = generateEd25519();
  const keyComment = `$(touch ${canary('key-s')});'"\`touch ${canary('key-b')}\` && x`;
  const hostilePubkey = `${userKey.public.trim().split(' ').slice(0, 2).join(' ')} ${keyComment}`;
  // Every printable hostile password value, spread over two installs (128 characters each at most).
  const passwdOnPve2 = `a'b"c$(touch ${canary('pw2-s')});d\`touch ${canary('pw2-b')}\` --purge -rf`;
  const passwdOnPve1 = `--purge -rf ;touch ${canary('pw1-c')} && touch ${canary('pw1-a')} ../../etc/passwd "'\\`;
  const keyOnPve2 = `$(touch ${canary('idem-s')}); '"\` --purge`;
  const keyOnPve1 = `;touch ${canary('idem-c')} && \`x\` ../../etc/passwd`;
  const installs: Record<'pve1' | 'pve2', Installed> = {} as never;

  beforeAll(async () => {
    const run = async (node: 'pve1' | 'pve2', passwd: string, key: string, extra: object): Promise<Installed> => {
      const res = await requestSse(`${h.api}/vm/install`, {
        body: { os: 'debian', version: '12', name: `hostile-${node}`, node, passwd, ...extra },
        headers: { 'Idempotency-Key': key },
      });
      const vmid = Number(/\[\*\] VMID: (\d+)/.exec(res.body)?.[1]);
      return { res, vmid, passwd, key };
    };
    [installs.pve2, installs.pve1] = await Promise.all([
      run('pve2', passwdOnPve2, keyOnPve2, { pubkey: hostilePubkey }),
      run('pve1', passwdOnPve1, keyOnPve1, {}),
    ]);
  }, 180_000);

  test('the passwords are accepted values (printable ASCII, at most 128 characters)', () => {
    for (const p of [passwdOnPve1, passwdOnPve2]) expect(p).toMatch(PRINTABLE_PASSWD);
  });

  test.each(['pve1', 'pve2'] as const)('the install on %s succeeded and the VM is there', async (node) => {
    const { res, vmid } = installs[node];
    expect(res.status).toBe(200);
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(res.closed).toBe(true);
    expect(vmid).toBeGreaterThanOrEqual(100);
    const { stdout } = await execa('pvesh', ['get', '/cluster/resources', '--type', 'vm', '--output-format', 'json'], {
      env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) },
    });
    expect((JSON.parse(stdout) as Array<{ vmid: number; node: string }>).find((v) => v.vmid === vmid)?.node).toBe(node);
  });

  test('pve2 was driven over the SSH executor (its sshd logged the root logins)', async () => {
    const calls = await h.sandbox.calls();
    const { vmid } = installs.pve2;
    expect(calls.some((c) => c.node === 'pve2' && c.argv[0] === 'qm' && c.argv.includes(String(vmid)))).toBe(true);
    const sshdLog = fs.readFileSync(path.join(h.sandbox.dir, 'sandbox', 'sshd', 'pve2', 'sshd.log'), 'utf8');
    expect(sshdLog).toMatch(/Accepted publickey for root/);
  });

  test.each(['pve1', 'pve2'] as const)('%s: the cipassword Proxmox stores is the hash of exactly the password sent', async (node) => {
    await expectCipasswordOf(installs[node].vmid, installs[node].passwd);
  });

  test('the hostile key comment is in the guest authorized_keys byte for byte, and the key logs in', async () => {
    const { vmid } = installs.pve2;
    const ak = fs.readFileSync(path.join(h.sandbox.dir, 'guests', String(vmid), 'root', 'home', 'debian', '.ssh', 'authorized_keys'), 'utf8');
    expect(ak.split('\n')).toContain(hostilePubkey);
    const { sshExec } = await import('../../sandbox/testkit');
    const r = await sshExec({ host: `127.0.0.${vmid}`, port: h.config.vmSshPort, username: 'debian', privateKey: userKey.private, command: 'true' });
    expect(r.code).toBe(0);
  });

  test("VM_ROOT_PASSWORD reached the guest only as its hash, on chpasswd -e's stdin", async () => {
    for (const node of ['pve1', 'pve2'] as const) {
      expectRootPasswordSetAsHash(await h.sandbox.guestLog(installs[node].vmid), ROOT_PASSWORD);
    }
  });

  test.each(['pve1', 'pve2'] as const)('%s: the Idempotency-Key became the workflow id by its hash; repeating it attaches', async (node) => {
    const { res, key } = installs[node];
    const expected = `install-key-${crypto.createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
    expect(res.headers['x-workflow-id']).toBe(expected);
    // The very same request: the same key with another body is refused (422).
    const again = await requestSse(`${h.api}/vm/install`, {
      body: { os: 'debian', version: '12', name: `hostile-${node}`, node, passwd: installs[node].passwd, ...(node === 'pve2' ? { pubkey: hostilePubkey } : {}) },
      headers: { 'Idempotency-Key': key },
    });
    expect(again.headers['x-workflow-id']).toBe(expected);
    expect(again.closed).toBe(true);
  });

  test('no hostile value is in any qm / pvesh / pvesm argv; exactly the two installs ran; no canary', async () => {
    const calls = await h.sandbox.calls();
    expect(calls.filter((c) => c.argv.join(' ').includes(CANARY_PREFIX))).toEqual([]);
    expect(JSON.stringify(calls)).not.toContain(passwdOnPve1);
    expect(JSON.stringify(calls)).not.toContain(passwdOnPve2);
    expect(await workflowCount()).toBe(2);
    expectNoCanary();
  });

  // ---- URL parameters, query strings, headers --------------------------------------------

  describe('URL parameters', () => {
    const cases = hostile('url').map(([label, v]) => [label, v] as const);

    test.each(cases)(':workflowId = %s: 404 naming it (or too large)', async (_label, v) => {
      for (const [method, p] of [
        ['GET', `/api/vm/install/${enc(v)}`],
        ['GET', `/api/workflows/${enc(v)}`],
        ['GET', `/api/vm/install/${enc(v)}/events`],
        ['POST', `/api/vm/install/${enc(v)}/cancel`],
        ['POST', `/api/workflows/${enc(v)}/cancel`],
      ] as const) {
        const a = await send(h.service.url, { method, path: p, headers: method === 'GET' ? {} : JSON_CT });
        expectRefused(a, p, /no workflow/, [404]);
        if (a.status === 404) expect(a.json!.message).toBe(`no workflow ${v}`);
      }
    });

    test.each(cases)(':id of the VM endpoints = %s: 400 naming id', async (_label, v) => {
      const ops = ['start', 'reboot', 'shutdown', 'stop', 'destroy', 'set/cpu', 'set/memory', 'set/disk', 'set/node'];
      const a = await send(h.service.url, { path: `/api/vm/${enc(v)}/status` });
      expectRefused(a, `/api/vm/${enc(v)}/status`, 'id');
      for (const op of ops) {
        const r = await send(h.service.url, { method: 'POST', path: `/api/vm/${enc(v)}/${op}`, headers: JSON_CT, body: '{}' });
        expectRefused(r, `/api/vm/${enc(v)}/${op}`, 'id');
      }
      const r = await send(h.service.url, { method: 'POST', path: `/api/vm/${enc(v)}/rebuild`, headers: JSON_CT });
      expectRefused(r, `/api/vm/${enc(v)}/rebuild`, 'id');
      for (const [method, p] of [
        ['GET', `/api/schedules/${enc(v)}`],
        ['POST', `/api/schedules/${enc(v)}/pause`],
        ['POST', `/api/schedules/${enc(v)}/unpause`],
        ['POST', `/api/schedules/${enc(v)}/trigger`],
        ['PATCH', `/api/schedules/${enc(v)}`],
        ['POST', `/api/schedules/${enc(v)}/update`],
        ['DELETE', `/api/schedules/${enc(v)}`],
      ] as const) {
        expectRefused(await send(h.service.url, { method, path: p, headers: method === 'GET' ? {} : JSON_CT }), p, /schedule|id/, [400, 404]);
      }
    });

    test('dot segments that are not encoded match no route', async () => {
      const a = await send(h.service.url, { path: '/api/vm/install/../../../etc/passwd' });
      expect(a.status).toBe(404);
      expect(a.json).toMatchObject({ success: false });
      const b = await send(h.service.url, { path: '/api/vm/..%2F..%2Fetc%2Fpasswd/status' });
      expectRefused(b, '', 'id');
    });
  });

  describe('query strings', () => {
    test.each(hostile('query'))('?disable= and ?after= = %s: 400 naming them', async (_label, v) => {
      const list = await send(h.service.url, { path: `/api/vm/list?disable=${enc(v)}` });
      expectRefused(list, `?disable=${enc(v)}`, 'disable');
      const wf = installs.pve1.res.headers['x-workflow-id'];
      const events = await send(h.service.url, { path: `/api/vm/install/${wf}/events?after=${enc(v)}` });
      expectRefused(events, `?after=${enc(v)}`, 'after');
    });
  });

  describe('headers', () => {
    test.each(hostile('hdr'))('Idempotency-Key and Last-Event-ID = %s: refused, or harmless', async (_label, v) => {
      const wf = installs.pve1.res.headers['x-workflow-id'] as string;
      // With a body that is refused, the key is never used: the body's field is named.
      const badBody = JSON.stringify({ os: 'bogus', version: '12' });
      if (sendable(v)) {
        const i = await send(h.service.url, { path: '/api/vm/install', headers: { ...JSON_CT, 'Idempotency-Key': v }, body: badBody });
        expectRefused(i, v, 'os');
        const e = await send(h.service.url, { path: `/api/vm/install/${wf}/events`, headers: { 'Last-Event-ID': v } });
        expectRefused(e, v, 'Last-Event-ID');
      } else {
        // NUL, CR/LF, UTF-8 and 100 KB: only a raw socket sends them. Node refuses the first
        // and the last with a JSON 400/431; UTF-8 (obs-text) gets through and is refused by name.
        const i = await rawRequest('POST', '/api/vm/install', { ...JSON_CT, 'Idempotency-Key': v }, badBody);
        expectRefused(i, v, /os|malformed/, [400]);
        const e = await rawRequest('GET', `/api/vm/install/${wf}/events`, { 'Last-Event-ID': v });
        expectRefused(e, v, /Last-Event-ID|malformed/, [400]);
      }
    });
  });

  // ---- lifecycle, rebuild and schedule bodies ---------------------------------------------

  describe('lifecycle bodies (on a stopped VM, so every check runs)', () => {
    let vmid: number;
    beforeAll(async () => {
      vmid = installs.pve1.vmid;
      const stop = await send(h.service.url, { method: 'POST', path: `/api/vm/${vmid}/stop`, headers: JSON_CT });
      expect([stop.status, stop.text]).toEqual([200, 'ok']);
    });

    test.each(hostile('life'))('set/node, set/disk, set/cpu, set/memory = %s: 400 naming the field', async (_label, v) => {
      for (const field of ['node', 'disk', 'cpu', 'memory']) {
        const a = await send(h.service.url, { method: 'POST', path: `/api/vm/${vmid}/set/${field}`, headers: JSON_CT, body: JSON.stringify({ [field]: v }) });
        expectRefused(a, v, field);
      }
    });

    test('the VM was not changed', async () => {
      const conf = (await h.sandbox.readConfig(vmid))!;
      expect(conf).toMatch(/^cores: 1$/m);
      expect(conf).toMatch(/^memory: 512$/m);
      expect(conf).toMatch(/^scsi0: .*size=16G/m);
      expect(await workflowCount()).toBe(3); // two installs and the stop
    });
  });

  describe('rebuild and schedule bodies', () => {
    test.each(hostile('rebuild'))('rebuild passwd = %s: refused by name, or valid (then 404: no such VM)', async (_label, v) => {
      const a = await send(h.service.url, { method: 'POST', path: `/api/vm/${UNKNOWN_VMID}/rebuild`, headers: JSON_CT, body: JSON.stringify({ passwd: v }) });
      if (PRINTABLE_PASSWD.test(v)) expectRefused(a, v, String(UNKNOWN_VMID), [404]);
      else expectRefused(a, v, 'passwd');
    });

    test.each(hostile('sched'))('schedule fields = %s: refused by name, or stored literally', async (_label, v) => {
      const vmid = installs.pve1.vmid;
      const oneLine = /^[^\x00-\x1f\x7f]{0,500}$/.test(v);
      for (const field of ['id', 'cron', 'interval', 'timezone', 'overlap']) {
        const body: Record<string, unknown> = { vmid, interval: '1d', paused: true, [field]: v };
        if (field === 'cron') delete body.interval;
        const a = await send(h.service.url, { method: 'POST', path: '/api/schedules', headers: JSON_CT, body: JSON.stringify(body) });
        expectRefused(a, v, field);
      }
      // A schedule of our own (ids are namespace-wide: never the default rebuild-vm-<vmid>).
      const id = `hostile-${RUN}-${crypto.randomBytes(3).toString('hex')}`;
      const create = (note: string) =>
        send(h.service.url, { method: 'POST', path: '/api/schedules', headers: JSON_CT, body: JSON.stringify({ id, vmid, interval: '1d', paused: true, note }) });
      const noteOf = async () => ((await send(h.service.url, { path: `/api/schedules/${id}` })).json?.schedule as { note?: string } | undefined)?.note;
      const created = await create(v);
      if (oneLine) {
        expect(created.status).toBe(201);
        expect(await noteOf()).toBe(v);
      } else {
        expectRefused(created, v, 'note');
        expect((await create('plain')).status).toBe(201);
      }
      try {
        for (const [field, body] of [['cron', { cron: v }], ['interval', { interval: v }], ['timezone', { timezone: v }], ['overlap', { overlap: v }]] as const) {
          expectRefused(await send(h.service.url, { method: 'PATCH', path: `/api/schedules/${id}`, headers: JSON_CT, body: JSON.stringify(body) }), v, field);
        }
        const patched = await send(h.service.url, { method: 'PATCH', path: `/api/schedules/${id}`, headers: JSON_CT, body: JSON.stringify({ note: v }) });
        if (oneLine) {
          expect(patched.status).toBe(200);
          expect(await noteOf()).toBe(v);
        } else expectRefused(patched, v, 'note');
        const paused = await send(h.service.url, { method: 'POST', path: `/api/schedules/${id}/pause`, headers: JSON_CT, body: JSON.stringify({ reason: v }) });
        if (oneLine && v.length > 0) {
          expect(paused.status).toBe(200);
          expect(await noteOf()).toBe(v);
        } else expectRefused(paused, v, 'reason');
      } finally {
        await send(h.service.url, { method: 'DELETE', path: `/api/schedules/${id}`, headers: JSON_CT });
      }
    });
  });

  test('after all of it: no hostile value in any qm argv, no canary on the host or in the guests', async () => {
    const calls = await h.sandbox.calls();
    expect(calls.filter((c) => c.argv.join(' ').includes(CANARY_PREFIX))).toEqual([]);
    expectNoCanary();
  });
});

// ---- the SSH executor with every hostile value as an argument --------------------------

describe('straight through the SSH executor to pve2: hostile arguments are literal or refused by qm', () => {
  const VMID = 250;
  let pve2: CliNode;
  let ssh: SshExecutor;

  beforeAll(async () => {
    const addr = h.sandbox.nodeAddresses.pve2;
    ssh = new SshExecutor({
      node: 'pve2',
      host: addr.host,
      port: addr.port,
      privateKeyPath: h.config.sshKeyPath,
      knownHostsDir: path.join(h.dir, 'security-known-hosts'),
    });
    pve2 = new CliNode(ssh);
    await pve2.createVm(VMID, { name: 'ssh-probe', memory: 512, ostype: 'l26' });
  });

  afterAll(async () => {
    await pve2?.destroy(VMID).catch(() => undefined);
    await ssh?.close();
  });

  test.each(hostile('ssh'))('%s', async (_label, v) => {
    // description: free text, stored and read back as exactly what was sent.
    const desc = await pve2.setVmOptions(VMID, { description: v }).then(
      () => 'stored',
      (err: Error) => err,
    );
    if (desc === 'stored') expect((await pve2.config(VMID)).description).toBe(v);
    else expect(String(desc)).toMatch(/NUL|description|too long|maxLength|format/i);

    // name: a DNS name; qm refuses what is not one, and keeps what is (100 KB of "A") as sent.
    if (await pve2.setVmOptions(VMID, { name: v }).then(() => true, () => false)) {
      expect((await pve2.config(VMID)).entries.name).toBe(v);
      await pve2.setVmOptions(VMID, { name: 'ssh-probe' });
    } else {
      expect(v).not.toMatch(/^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$/);
    }

    // cipassword: hashed in the service; the hash qm stores verifies against the value.
    if (/^[\x20-\x7e]{1,1024}$/.test(v)) {
      await pve2.setVmOptions(VMID, { cipassword: v });
      const conf = fs.readFileSync(path.join(h.sandbox.dir, 'nodes', 'pve2', 'qemu-server', `${VMID}.conf`), 'utf8');
      const m = /^cipassword: (\$5\$([^$]+)\$\S+)$/m.exec(conf)!;
      expect(await opensslSha256Crypt(v, m[2])).toBe(m[1]);
    } else {
      await pve2.setVmOptions(VMID, { cipassword: v }).catch(() => undefined);
    }
    expectNoCanary();
  });

  test('the config holds no option injected by a value', async () => {
    const conf = await pve2.config(VMID);
    expect(conf.entries.name).toBe('ssh-probe');
    expect(Object.keys(conf.entries).filter((k) => /purge|rf/.test(k))).toEqual([]);
  });
});

// ---- off the cluster: every command of an install over SSH ------------------------------

describe('an off-cluster deployment (main node over SSH too): hostile values through a whole install', () => {
  let off: Harness;
  const rootPassword = `o'f"f\`touch ${canary('off-root-b')}\`$(touch ${canary('off-root-s')})`;
  const passwd = `-rf '"$(touch ${canary('off-pw-s')});\`touch ${canary('off-pw-b')}\` && x --purge`;
  let res: SseResponse;
  let vmid: number;

  beforeAll(async () => {
    off = await startHarness({ VM_ROOT_PASSWORD: rootPassword }, { mainNodeOverSsh: true });
    res = await requestSse(`${off.api}/vm/install`, { body: { os: 'ubuntu', version: '22.04', name: 'offcluster', node: 'pve2', passwd } });
    vmid = Number(/\[\*\] VMID: (\d+)/.exec(res.body)?.[1]);
  }, 180_000);

  afterAll(async () => {
    await off?.stop();
  });

  test('the install succeeded, with every qm/pvesh/pvesm call made through a node sshd', async () => {
    expect(passwd).toMatch(PRINTABLE_PASSWD);
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(res.closed).toBe(true);
    const pve1Log = fs.readFileSync(path.join(off.sandbox.dir, 'sandbox', 'sshd', 'pve1', 'sshd.log'), 'utf8');
    expect(pve1Log).toMatch(/Accepted publickey for root/);
    const calls = await off.sandbox.calls();
    expect(calls.some((c) => c.node === 'pve1' && c.argv[0] === 'qm' && c.argv[1] === 'set' && c.argv.includes('--cipassword'))).toBe(true);
    expect(calls.filter((c) => c.argv.join(' ').includes(CANARY_PREFIX))).toEqual([]);
  });

  test('the stored cipassword verifies against exactly the password sent; root got the hash of its password', async () => {
    const conf = (await off.sandbox.readConfig(vmid))!;
    const m = /^cipassword: (\$5\$([^$]+)\$\S+)$/m.exec(conf)!;
    expect(await opensslSha256Crypt(passwd, m[2])).toBe(m[1]);
    expectRootPasswordSetAsHash(await off.sandbox.guestLog(vmid), rootPassword);
  });

  test('no canary on the host or in its guests', () => {
    expectNoCanary();
    expect(canariesUnder(path.join(off.sandbox.dir, 'guests'))).toEqual([]);
  });
});
