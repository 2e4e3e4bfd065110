import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { freePort } from '../../lib/network';
import { freePorts } from '../../sandbox/testkit';
import { docBlocks, parseCurlAnswer, withStatus, type CurlAnswer, type DocCommand } from '../support/docExamples';

/**
 * A newcomer's first run: a fresh checkout (the files git knows, nothing ignored: no
 * data/, no .env), `npm start` there with nothing configured and no network (a network
 * namespace of its own, loopback only, when this machine allows one; the default ports
 * are then free too), then the curl examples of README.md and docs/*.md, as written: only
 * the VMID the install printed replaces the docs' 120 (and, without a namespace, free
 * ports replace the default ones). The install must end with the seed's four events and
 * every other example must get the answer the docs promise.
 */

const REPO = path.resolve(__dirname, '..', '..');
const DOC = 'http://127.0.0.1:8080';
const blocks = [
  ...docBlocks(path.join(REPO, 'README.md')),
  ...fs.readdirSync(path.join(REPO, 'docs')).filter((f) => f.endsWith('.md')).flatMap((f) => docBlocks(path.join(REPO, 'docs', f))),
].filter((b) => b.commands.some((c) => c.text.includes('curl ')));
const ran = new Set<string>();

let dir: string;
let home: string;
let checkout: string;
let child: ResultPromise;
let output = () => '';
let servicePid = 0;
let base = DOC;
let vmid = 0;

async function netnsAvailable(): Promise<boolean> {
  const r = await execa('unshare', ['--net', 'ip', 'link', 'set', 'lo', 'up'], { reject: false }).catch(() => undefined);
  return r?.exitCode === 0;
}

/**
 * The working tree's files as a clone would have them; node_modules and the Temporal CLI
 * (.tools) are linked in, as `npm install` and the first `npm start` would make them.
 */
async function freshCheckout(dest: string): Promise<void> {
  const { stdout } = await execa('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO });
  // A worktree may have both as symlinks, which `.gitignore`'s `dir/` patterns do not match.
  const linkedIn = new Set(['node_modules', '.tools']);
  for (const file of stdout.split('\0').filter((f) => f && !linkedIn.has(f))) {
    const src = path.join(REPO, file);
    if (!fs.existsSync(src)) continue; // deleted, not yet committed
    fs.mkdirSync(path.dirname(path.join(dest, file)), { recursive: true });
    fs.copyFileSync(src, path.join(dest, file));
  }
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dest, 'node_modules'));
  if (fs.existsSync(path.join(REPO, '.tools'))) fs.symlinkSync(fs.realpathSync(path.join(REPO, '.tools')), path.join(dest, '.tools'));
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-docs-'));
  home = path.join(dir, 'home');
  fs.mkdirSync(home);
  checkout = path.join(dir, 'qemurun');
  await freshCheckout(checkout);
  // What a newcomer's shell has; only the guests' boot delay is cut short, for time.
  const env: Record<string, string> = { PATH: process.env.PATH!, HOME: home, SANDBOX_BOOT_DELAY_MS: '300' };
  let argv = ['bash', '-c', 'exec npm start'];
  if (await netnsAvailable()) {
    argv = ['unshare', '--net', '--fork', '--kill-child=SIGTERM', 'bash', '-c', 'ip link set lo up && exec npm start'];
  } else {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    Object.assign(env, {
      PORT: String(port),
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      VM_SSH_PORT: String(await freePort()),
      SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
    });
  }
  child = execa(argv[0], argv.slice(1), { cwd: checkout, env, extendEnv: false, all: true, reject: false });
  let out = '';
  child.all!.on('data', (c: Buffer) => (out += c.toString()));
  output = () => out;
  const deadline = Date.now() + 150_000;
  while (!out.includes('Task queue:')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  // unshare's child (bash, then npm by exec) is in the namespace the commands must join.
  servicePid = Number(fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ')[0]) || child.pid!;
}, 180_000);

afterAll(async () => {
  if (servicePid) process.kill(servicePid, 'SIGTERM');
  await child;
  if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs one example in the service's network, with the newcomer's HOME. */
async function run(cmd: DocCommand): Promise<CurlAnswer> {
  ran.add(cmd.text);
  const script = [...cmd.setup, withStatus(cmd.text)].join('\n').replaceAll(DOC, base).replace(/\b120\b/g, String(vmid));
  const argv = base === DOC ? ['nsenter', `--net=/proc/${servicePid}/ns/net`, 'bash', '-c', script] : ['bash', '-c', script];
  const r = await execa(argv[0], argv.slice(1), { env: { PATH: process.env.PATH!, HOME: home }, extendEnv: false, reject: false, timeout: 120_000 });
  if (r.exitCode !== 0) throw new Error(`${cmd.text}\nexited ${r.exitCode}: ${r.stderr}`);
  return parseCurlAnswer(r.stdout);
}

/** The answer the docs promise: 2xx, what the trailing comment says, a stream that succeeded. */
async function runAsDocumented(cmd: DocCommand): Promise<CurlAnswer> {
  const a = await run(cmd);
  const fail = (why: string) => new Error(`${cmd.text}\n${why}\n-> ${a.status} ${a.body.slice(-2000)}`);
  if (a.status < 200 || a.status > 299) throw fail('not a 2xx answer');
  const c = cmd.comment ?? '';
  const code = /^(\d{3})\b/.exec(c);
  if (code && a.status !== Number(code[1])) throw fail(`expected status ${code[1]}`);
  const word = /^(ok|running|stopped)(?=$|\s+\()/.exec(c);
  if (word && a.body.trim() !== word[1]) throw fail(`expected "${word[1]}"`);
  if (c.startsWith('{')) expect(JSON.parse(a.body)).toMatchObject(JSON.parse(c));
  if (/^\{"success":\s*false/.test(a.body)) throw fail('success: false');
  if (a.events.some((e) => e.status === 'error')) throw fail('the stream reports an error');
  if (/\bcurl -N\b/.test(cmd.text) && (a.events.length === 0 || !/^event: close$/m.test(a.body))) throw fail('not a whole event stream');
  return a;
}

const find = (file: string, needle: string) => {
  const found = blocks.filter((b) => b.file === file && b.commands.some((c) => c.text.includes(needle)));
  expect(found).toHaveLength(1);
  return found[0].commands;
};

test('the start banner says sandbox mode and where images come from', () => {
  expect(output()).toMatch(/SANDBOX MODE/);
  expect(output()).toMatch(/^Images: +built-in mirror at http:\/\/127\.0\.0\.1:\d+/m);
});

test("README's install example completes offline with the seed's four final events", async () => {
  const [install] = find('README.md', '/api/vm/install');
  // docs/api.md shows the same example; running one covers both.
  expect(find('api.md', '/api/vm/install').map((c) => c.text)).toEqual([install.text]);
  ran.add(install.text);
  const a = await runAsDocumented(install);
  const last = a.events.slice(-4).map((e) => `${e.step} | ${e.status} | ${e.message}`);
  const id = Number(/\[\*\] VMID: (\d+)/.exec(last[1] ?? '')?.[1]);
  expect(last).toEqual([
    expect.stringMatching(/^VM initialization > finalizing \| success \| \[\+\] VM installation completed in \d+\.\d\ds$/),
    `VM initialization > finalizing | success | [*] VMID: ${id}`,
    `VM initialization > finalizing | success | [*] IP: 127.0.0.${id}`,
    'VM initialization > finalizing | success | [*] User: ubuntu',
  ]);
  vmid = id;
  // The product's own download code fetched it, from the built-in mirror.
  expect(fs.existsSync(path.join(checkout, 'data', 'images', 'ubuntu-24.04', 'ubuntu-24.04-server-cloudimg-amd64.img'))).toBe(true);
  expect(a.events.map((e) => e.step)).toContain('OS preparation > download');
}, 180_000);

test('the init script example serves the script', async () => {
  const [cmd] = find('init-scripts.md', '/sh/');
  const a = await runAsDocumented(cmd);
  expect(a.body).toMatch(/^#!/);
});

test('the rebuild examples rebuild the VM', async () => {
  expect(vmid).toBeGreaterThan(0);
  for (const cmd of find('api.md', '/rebuild ')) {
    const a = await runAsDocumented(cmd);
    expect(a.events.slice(-4).map((e) => e.message)).toEqual([
      expect.stringMatching(/^\[\+\] VM rebuild completed in/),
      `[*] VMID: ${vmid}`,
      `[*] IP: 127.0.0.${vmid}`,
      '[*] User: ubuntu',
    ]);
  }
}, 240_000);

test('the metrics example counts the install', async () => {
  const [cmd] = find('deployment.md', '/metrics');
  const a = await runAsDocumented(cmd);
  expect(a.body).toMatch(/^qemurun_installs_completed_total\{os="ubuntu-24\.04"\} [1-9]/m);
});

test('the schedule examples, including a triggered rebuild that completes', async () => {
  expect(vmid).toBeGreaterThan(0);
  const before = Date.now();
  for (const cmd of find('api.md', '$API/schedules')) await runAsDocumented(cmd);
  // The trigger started a rebuild of the VM; the next examples need it finished.
  const probe: DocCommand = { text: `curl ${DOC}/api/workflows/vm-${vmid}`, setup: [], comment: undefined };
  const deadline = Date.now() + 120_000;
  for (;;) {
    const w = JSON.parse((await run(probe)).body) as { status?: string; startTime?: string };
    ran.delete(probe.text);
    const fresh = w.startTime !== undefined && Date.parse(w.startTime) >= before;
    if (fresh && w.status === 'COMPLETED') break;
    if (fresh && w.status !== 'RUNNING') throw new Error(`the triggered rebuild ended ${w.status}`);
    if (Date.now() > deadline) throw new Error(`the triggered rebuild did not finish: ${JSON.stringify(w)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}, 240_000);

test('the VM operation examples, top to bottom', async () => {
  expect(vmid).toBeGreaterThan(0);
  for (const cmd of find('api.md', '/api/vm/list ')) await runAsDocumented(cmd);
}, 240_000);

test('the adopt example takes a VM made by hand into the managed set', async () => {
  const [cmd] = find('api.md', '/adopt');
  // VM 150 made outside QemuRun, as an operator would with qm on the main node.
  const qm = [
    `PATH=${path.join(checkout, 'sandbox', 'bin')}:$PATH`,
    `PVE_SANDBOX_DIR=${path.join(checkout, 'data', 'sandbox')}`,
    'PVE_SANDBOX_NODE=pve1',
    `PVE_SANDBOX_NODEJS=${process.execPath}`,
    'qm create 150 --name foreign',
  ].join(' ');
  const argv = base === DOC ? ['nsenter', `--net=/proc/${servicePid}/ns/net`, 'bash', '-c', qm] : ['bash', '-c', qm];
  const made = await execa(argv[0], argv.slice(1), { reject: false, timeout: 60_000 });
  expect([made.exitCode, made.stderr]).toEqual([0, '']);
  const a = await runAsDocumented(cmd);
  expect(JSON.parse(a.body)).toMatchObject({ success: true, vmid: 150 });
}, 120_000);

test('the reconcile examples: the dry run changes nothing, the run answers what it did', async () => {
  const [dryRun, live] = find('api.md', '/api/reconcile');
  const planned = JSON.parse((await runAsDocumented(dryRun)).body);
  expect(planned).toMatchObject({ success: true, dryRun: true, removed: [], failed: [] });
  const done = JSON.parse((await runAsDocumented(live)).body);
  expect(done).toMatchObject({ success: true, dryRun: false, failed: [] });
  // What the dry run would remove is what the run removed; every VM is listed either way.
  expect(done.removed).toEqual(planned.vms.filter((v: { action: string }) => v.action === 'remove').map((v: { vmid: number }) => v.vmid));
  expect(done.vms.map((v: { vmid: number }) => v.vmid)).toEqual(planned.vms.map((v: { vmid: number }) => v.vmid));
});

test("docs/api.md's address-pools listing answers, and without ADDRESS_POOLS it is empty, as the text says", async () => {
  const [list] = find('api.md', '/api/address-pools');
  const a = await runAsDocumented(list);
  expect(JSON.parse(a.body)).toEqual({ count: 0, pools: [] });
});

test("docs/api.md's template examples: the listing answers as shown with no template yet, and a build starts (202)", async () => {
  const [list] = find('api.md', 'curl http://127.0.0.1:8080/api/templates');
  expect(JSON.parse((await runAsDocumented(list)).body)).toEqual({ count: 0, templates: [], schedules: [], maxAgeSec: 604800 });
  const [build] = find('api.md', '-X POST http://127.0.0.1:8080/api/templates');
  const a = await runAsDocumented(build);
  expect(a.status).toBe(202);
  expect(JSON.parse(a.body)).toEqual({
    success: true,
    workflowId: 'template-debian-12',
    started: true,
    status: '/api/workflows/template-debian-12',
    events: '/api/workflows/template-debian-12/events',
  });
});

test('no curl example of the docs was left out', () => {
  const all = blocks.flatMap((b) => b.commands.map((c) => c.text));
  expect(all.filter((t) => !ran.has(t))).toEqual([]);
});
