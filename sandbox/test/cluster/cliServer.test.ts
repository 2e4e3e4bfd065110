import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execa } from 'execa';
import { eventually, startTestCluster, sshExec, type TestCluster } from '../../testkit';
import { readCalls } from '../../state/callLog';
import { sandboxSourceDir } from '../../location';
import { clusterPaths } from '../../state/paths';
import { vmProcess } from '../../state/runtime';

/**
 * The CLIs on PATH hand their call to the cluster's resident CLI server; what a caller sees
 * (stdout, stderr, exit code, state) is what the same call prints as its own Node process,
 * locally and over the node's real sshd.
 */
let t: TestCluster;

beforeAll(async () => {
  t = await startTestCluster();
});
afterAll(async () => {
  await t?.dispose();
});

const src = sandboxSourceDir();
const onPath = (node: string, argv: string[]) => execa(argv[0], argv.slice(1), { env: t.cluster.envFor(node), reject: false, stripFinalNewline: false });
/** The same call as its own Node process, as sandbox/bin/* run it without a server. */
const asProcess = (node: string, argv: string[]) =>
  execa(process.execPath, [path.join(src, 'tsrun.js'), path.join(src, 'cli', 'main.ts'), ...argv], { env: t.cluster.envFor(node), reject: false, stripFinalNewline: false });

const seen = (r: { exitCode?: number; stdout: unknown; stderr: unknown }) => ({ code: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr) });

test('the server is running and answers calls: each is logged with a start-up of a few ms, not a Node start', async () => {
  expect(fs.existsSync(path.join(t.cluster.dir, 'sandbox', 'cli.port'))).toBe(true);
  const before = readCalls(t.cluster.dir).length;
  const r = await onPath('pve1', ['qm', 'list']);
  expect(r.exitCode).toBe(0);
  const calls = readCalls(t.cluster.dir).slice(before);
  expect(calls).toHaveLength(1);
  expect(calls[0]).toMatchObject({ argv: ['qm', 'list'], resident: true });
  // From the bash client's start to the command's: no Node start-up in it.
  expect(calls[0].startupMs).toBeDefined();
});

test('outputs, errors and exit codes are the same as the CLI run as its own process', async () => {
  const create = ['create', '--name', 'web', '--description', `it's "quoted"`, '--memory', '1024', '--net0', 'virtio,bridge=vmbr0'];
  const pairs: Array<[string, string[]]> = [
    ['pve1', ['qm', ...create.slice(0, 1), '301', ...create.slice(1)]],
    ['pve1', ['qm', 'config', '301']],
    ['pve1', ['qm', 'list']],
    ['pve1', ['qm', 'config', '999']],
    ['pve1', ['qm', 'set', '301', '--tags', 'debian', '--description', 'line one\nline two ${HOME} $(id)']],
    ['pve1', ['qm', 'config', '301']],
    ['pve2', ['pvesh', 'get', '/cluster/resources', '--type', 'vm', '--output-format', 'json']],
    ['pve1', ['pvesm', 'status']],
    ['pve1', ['qm', 'no-such-command']],
    ['pve1', ['qm', 'destroy', '301', '--purge']],
  ];
  for (const [node, argv] of pairs) {
    const viaServer = seen(await onPath(node, argv));
    // Commands that change state are compared on a second VM made the same way.
    const other = argv.map((a) => (a === '301' ? '302' : a));
    const viaProcess = seen(await asProcess(node, other));
    // The two VMs differ in their VMID and in what qm create draws at random.
    const norm = (text: string) =>
      text
        // Random values first: a drawn UUID or MAC can contain "301" itself.
        .replace(/[0-9A-F]{2}(?::[0-9A-F]{2}){5}/g, 'MAC')
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'UUID')
        .replace(/ctime=\d+/g, 'ctime=T')
        .replace(/\b30[12]\b/g, 'N');
    const same = (r: typeof viaServer) => ({ argv, code: r.code, stdout: norm(r.stdout), stderr: norm(r.stderr) });
    expect(same(viaServer)).toEqual(same(viaProcess));
    if (argv[1] === 'create') expect(viaServer.code).toBe(0);
  }
});

test('over the node sshd, a call reaches the same server and prints the same', async () => {
  const addr = t.cluster.nodeAddresses.pve2;
  const before = readCalls(t.cluster.dir).length;
  const r = await sshExec({ host: addr.host, port: addr.port, username: 'root', privateKey: t.rootKey.privateKey, command: 'pvesm status' });
  const local = seen(await asProcess('pve2', ['pvesm', 'status']));
  expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual(local);
  const calls = readCalls(t.cluster.dir).slice(before);
  expect(calls.map((c) => [c.node, c.argv.join(' '), c.resident])).toContainEqual(['pve2', 'pvesm status', true]);
});

/** One raw request to the server's port, NUL-terminated fields as sandbox/bin/* send them. */
function rawCall(fields: string[]): Promise<string> {
  const [port] = fs.readFileSync(path.join(t.cluster.dir, 'sandbox', 'cli.port'), 'utf8').trim().split(' ');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
    let answer = '';
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    socket.end(fields.map((f) => `${f}\0`).join(''));
  });
}

test('another local user cannot drive it: the port file is owner-only and a call without its token runs nothing', async () => {
  const portFile = path.join(t.cluster.dir, 'sandbox', 'cli.port');
  expect(fs.statSync(portFile).mode & 0o777).toBe(0o600);
  const [, token] = fs.readFileSync(portFile, 'utf8').trim().split(' ');
  expect(token).toMatch(/^[0-9a-f]{64}$/);
  const create = (vmid: string) => [String(Date.now() / 1000), t.cluster.dir, 'pve1', 'qm', '4', 'create', vmid, '--name', 'x'];
  const before = readCalls(t.cluster.dir).length;

  // What anyone who finds the port can send: a request as the clients sent it before tokens,
  // and one with a guessed token.
  expect(await rawCall(create('330'))).toBe('refused\n');
  expect(await rawCall(['0'.repeat(64), ...create('331')])).toBe('refused\n');
  expect(readCalls(t.cluster.dir).length).toBe(before);
  for (const vmid of ['330', '331']) expect((await onPath('pve1', ['qm', 'config', vmid])).exitCode).not.toBe(0);

  // With the token from the file, the same request runs.
  expect(await rawCall([token, ...create('332')])).toMatch(/^0 -\n/);
  expect((await onPath('pve1', ['qm', 'config', '332'])).stdout).toMatch(/^name: x$/m);
  await onPath('pve1', ['qm', 'destroy', '332']);
});

test('when the server is gone the CLIs start Node themselves, with the same answers', async () => {
  const port = path.join(t.cluster.dir, 'sandbox', 'cli.port');
  const saved = fs.readFileSync(port, 'utf8');
  fs.rmSync(port);
  try {
    const r = seen(await onPath('pve1', ['pvesm', 'status']));
    expect(r).toEqual(seen(await asProcess('pve1', ['pvesm', 'status'])));
    expect(r.code).toBe(0);
    expect(readCalls(t.cluster.dir).at(-1)?.resident).toBeUndefined();
  } finally {
    fs.writeFileSync(port, saved);
  }
});

test('the sandbox runs at a lower CPU priority than its caller: it stands for other machines', async () => {
  const niceness = (pid: string) => Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[16]);
  // A VM leads a session of its own, which autogroup scheduling weighs as a whole: the
  // session's niceness must be lowered too (`/autogroup-42 nice 10`, where the kernel has it).
  // The kernel prints nothing for a process in no autogroup of its own: one whose session
  // was never started by setsid, like PID 1's, where some CI runners start their commands.
  // The caller may be one; a VM must not be.
  const autogroup = (pid: string) => {
    const text = fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8');
    if (text === '') return undefined;
    const m = /^(\S+) nice (-?\d+)/.exec(text);
    if (!m) throw new Error(`/proc/${pid}/autogroup reads ${JSON.stringify(text)}`);
    return { group: m[1], nice: Number(m[2]) };
  };
  const hasAutogroup = fs.existsSync('/proc/self/autogroup');
  const lowered = (pid: string) => {
    expect(niceness(pid)).toBe(niceness(String(process.pid)) + 10);
    if (!hasAutogroup) return;
    const own = autogroup(pid);
    expect(own).toEqual({ group: expect.any(String), nice: niceness(String(process.pid)) + 10 });
    expect(own?.group).not.toBe(autogroup(String(process.pid))?.group);
  };
  const server = fs.readdirSync('/proc').find((pid) => {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return cmd.includes(path.join('cli', 'server.ts')) && cmd.includes(t.cluster.dir);
    } catch {
      return false;
    }
  });
  expect(server).toBeDefined();
  expect(niceness(server!)).toBe(niceness(String(process.pid)) + 10);
  // A session on a node's sshd (where the CLIs of non-main nodes run) inherits it.
  const addr = t.cluster.nodeAddresses.pve2;
  const r = await sshExec({ host: addr.host, port: addr.port, username: 'root', privateKey: t.rootKey.privateKey, command: 'nice' });
  expect(Number(r.stdout)).toBe(niceness(String(process.pid)) + 10);
  // A VM, whether `qm start` ran in the server or `qm reboot` as this process's child.
  // It is looked at once it has booted (a VM without a disk says so on its console), and
  // a VM that has ended meanwhile fails the test with its console, not with a misreading.
  const vmPid = () => String((JSON.parse(fs.readFileSync(clusterPaths(t.cluster.dir).pidFile(310), 'utf8')) as { pid: number }).pid);
  const consoleText = () => fs.readFileSync(clusterPaths(t.cluster.dir).guestConsole(310), 'utf8');
  const boots = () => consoleText().split('No bootable device').length - 1;
  const loweredOnceBooted = async (bootsBefore: number) => {
    const pid = vmPid();
    const running = () => vmProcess(t.cluster.dir, 310)?.pid === Number(pid);
    await eventually(async () => {
      if (!running()) throw new Error(`VM 310 (pid ${pid}) is not running; its console:\n${consoleText()}`);
      if (boots() <= bootsBefore) throw new Error('still booting');
    });
    lowered(pid);
    expect(running()).toBe(true);
  };
  expect((await onPath('pve1', ['qm', 'create', '310', '--name', 'nice', '--memory', '512'])).exitCode).toBe(0);
  expect((await onPath('pve1', ['qm', 'start', '310'])).exitCode).toBe(0);
  await loweredOnceBooted(0);
  const before = vmPid();
  expect((await onPath('pve1', ['qm', 'reboot', '310'])).exitCode).toBe(0);
  // qmeventd starts it again after the reboot returned (sandbox/cli/qmeventd.ts).
  await eventually(async () => expect(vmPid()).not.toBe(before));
  await loweredOnceBooted(1);
  await onPath('pve1', ['qm', 'stop', '310']);
  await onPath('pve1', ['qm', 'destroy', '310']);
});
