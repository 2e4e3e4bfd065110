import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '../../lib/network';
import { startHarness, type Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { flakyProxy, runCli, runCliInPty } from '../support/cliProcess';
import { imageInstallStepNames } from '../support/installSteps';

/**
 * `qemurun` end to end: the CLI's own process against the real service (API, worker,
 * Temporal, the sandbox cluster), in a real pseudo-terminal where a person would watch it,
 * and with pipes where a script would.
 */

let h: Harness;
let url: string;
/** The VM the first install made, for the operations. */
let firstVm: { vmid: number; ip: string } | undefined;

beforeAll(async () => {
  h = await startHarness();
  url = h.service.url;
}, 180_000);

afterAll(async () => {
  await h?.stop();
});

const SPINNER = '[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]';
const STEPS = imageInstallStepNames;

const doneSteps = (lines: string[]) => lines.filter((l) => /^✔ .* > /.test(l)).map((l) => l.replace(/^✔ /, '').replace(/ {2}[\d.]+s$/, ''));

function expectSummary(lines: string[], user: string): { vmid: number; ip: string } {
  const at = lines.findIndex((l) => /^✔ VM installation completed in [\d.]+s$/.test(l));
  expect(at).toBeGreaterThan(0);
  const facts = /^ {2}VMID (\d+) {3}IP ([\d.]+) {3}User (\S+)$/.exec(lines[at + 1]);
  expect(facts?.[3]).toBe(user);
  expect(lines[at + 2]).toBe(`  ssh ${user}@${facts![2]}`);
  return { vmid: Number(facts![1]), ip: facts![2] };
}

describe('on a terminal', () => {
  it('shows one line per step, a bar while the disk imports, the init script beneath its step, and the summary', async () => {
    // `--reboot always`: the image path's every step, the reboot and its SSH wait included.
    const pty = runCliInPty(url, ['install', '--os', 'debian', '--version', '12', '--name', 'tty', '--node', 'pve2', '--reboot', 'always']);
    expect(await pty.exit).toBe(0);
    const snapshots = pty.screen.snapshots;

    // While the import ran: its line with a spinner and the time so far, the bar under it.
    const importing = snapshots.find((s) => s.some((l, i) => new RegExp(`^${SPINNER} VM creation > import disk {2}[\\d.]+s$`).test(l) && /^ {2}█*░* +\d+%$/.test(s[i + 1] ?? '')));
    expect(importing).toBeDefined();
    // While the init script ran: its last lines of output beneath it.
    const initScript = snapshots.find((s) => {
      const i = s.findIndex((l) => new RegExp(`^${SPINNER} VM initialization > init script`).test(l));
      return i >= 0 && s.slice(i + 1).filter((l) => l.startsWith('  │ ')).length >= 2;
    });
    expect(initScript).toBeDefined();

    const lines = pty.screen.lines();
    expect(lines[0]).toMatch(/^workflow install-/);
    expect(doneSteps(lines)).toEqual(STEPS);
    const vm = (firstVm = expectSummary(lines, 'debian'));
    // No spinner, bar or output left once it is over.
    expect(lines.some((l) => new RegExp(`${SPINNER}|█|│`).test(l))).toBe(false);
    expect((await apiCall(h.api, 'GET', `/vm/${vm.vmid}/status`)).json).toBe('running');
  });

  it('detaches on Ctrl-C while the install goes on, and attach follows it to the end', async () => {
    const pty = runCliInPty(url, ['install', '--os', 'debian', '--version', '12', '--name', 'detach']);
    await pty.waitFor((s) => s.some((l) => l.startsWith('✔ VM creation > qm create')));
    pty.interrupt();
    expect(await pty.exit).toBe(130);
    const lines = pty.screen.lines();
    const id = /^detached: workflow (install-\S+) goes on$/.exec(lines.at(-2) ?? '')?.[1];
    expect(id).toBeDefined();
    expect(lines.at(-1)).toBe(`re-attach with: qemurun attach ${id}`);
    expect(lines.some((l) => l.includes('completed'))).toBe(false);

    const again = runCliInPty(url, ['attach', id!]);
    expect(await again.exit).toBe(0);
    const attached = again.screen.lines();
    expect(attached[0]).toBe(`workflow ${id}`);
    // By default a guest that needs no reboot gets none: the reboot step says so, and no second SSH wait follows.
    expect(doneSteps(attached)).toEqual(STEPS.filter((s) => !s.endsWith('migrate')).slice(0, -1));
    expectSummary(attached, 'debian');
    const status = await apiCall(h.api, 'GET', `/workflows/${id}`);
    expect(status.json).toMatchObject({ status: 'COMPLETED', result: { name: expect.stringMatching(/^detach-/) } });
  });
});

describe('in a pipe', () => {
  it('--json prints every event once, in order, re-attaching with Last-Event-ID after a dropped connection', async () => {
    // Cut the install's own stream a few events in.
    const proxy = await flakyProxy(new URL(url), 3000);
    try {
      const r = await runCli(proxy.url, ['--json', 'install', '--os', 'ubuntu', '--version', '24.04', '--name', 'pipe']);
      expect(r.exitCode).toBe(0);
      expect(proxy.cuts()).toBe(1);
      expect(r.stderr).toMatch(/re-attaching after event \d+ \(attempt 1\)/);
      const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: number; step: string; status: string; message: string });
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
      expect(events.at(-1)).toEqual({ id: events.length, step: 'VM initialization > finalizing', status: 'success', message: '[*] User: ubuntu' });

      // Plain lines of the same install, read again afterwards.
      const id = /workflow id: (\S+)/.exec(events[0].message)![1];
      const plain = await runCli(url, ['attach', id]);
      expect(plain.exitCode).toBe(0);
      const lines = plain.stdout.trim().split('\n');
      expect(lines).toEqual(events.map((e) => `${e.step}: ${e.message}`));
      expect(plain.stdout).not.toContain('\x1b');
    } finally {
      await proxy.close();
    }
  });

  it('--async starts an install without a stream; Ctrl-C with --cancel-on-interrupt cancels it, and the exit status follows the last event', async () => {
    const started = await runCli(url, ['--json', 'install', '--async', '--os', 'debian', '--version', '12', '--name', 'cancel']);
    expect(started.exitCode).toBe(0);
    const { workflowId } = JSON.parse(started.stdout) as { workflowId: string };
    expect(workflowId).toMatch(/^install-/);

    const follow = runCli(url, ['--json', 'attach', workflowId, '--cancel-on-interrupt']);
    let seen = '';
    await new Promise<void>((resolve) => {
      follow.stdout.on('data', (c: Buffer) => {
        seen += c.toString();
        if (seen.includes('VM creation > import disk')) resolve();
      });
    });
    follow.kill('SIGINT');
    const r = await follow;
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`cancelling workflow ${workflowId}`);
    const last = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { status: string; message: string };
    expect(last).toMatchObject({ status: 'error', message: '[-] install cancelled' });
    expect((await apiCall(h.api, 'GET', `/workflows/${workflowId}`)).json.status).toBe('CANCELLED');
  });

  it('exit status: 1 for a refused request with the API message, 2 for a bad command line, 3 when no server answers', async () => {
    const refused = await runCli(url, ['install', '--os', 'debian', '--version', '99']);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(/^qemurun: 400: please check your input: version/);
    // The network flags reach the body's fields, which the API judges.
    for (const [flags, says] of [
      [['--vlan', '5000'], 'vlan: must be at most 4094'],
      [['--mtu', '9000', '--bridge', 'vmbr/1'], 'bridge: must be a Proxmox bridge name'],
      [['--dns', '192.0.2.53,resolver.example'], 'dns.servers[1]: must be an IPv4 or IPv6 address'],
      [['--dns', '192.0.2.53', '--dns-search', 'a b'], 'dns.search: must be one domain name'],
    ] as const) {
      const bad = await runCli(url, ['install', '--os', 'debian', '--version', '12', ...flags]);
      expect([bad.exitCode, bad.stderr]).toEqual([1, expect.stringContaining(`qemurun: 400: please check your input: ${says}`)]);
    }

    const usage = await runCli(url, ['install', '--os', 'debian', '--version', '12', '--cpu', 'two']);
    expect(usage.exitCode).toBe(2);
    expect(usage.stderr).toContain("option '--cpu <n>' argument 'two' is invalid");

    // A port that was free a moment ago: nothing listens there.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const nobody = await runCli(closed, ['list']);
    expect(nobody.exitCode).toBe(3);
    expect(nobody.stderr).toBe(`qemurun: cannot reach QemuRun at ${closed}: ECONNREFUSED`);

    // A server from before reconcile existed answers its route with the API's plain 404.
    const old = http.createServer((_req, res) => res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"success":false,"message":"not found"}'));
    await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
    try {
      const reconcile = await runCli(`http://127.0.0.1:${(old.address() as AddressInfo).port}`, ['reconcile']);
      expect(reconcile.exitCode).toBe(1);
      expect(reconcile.stderr).toContain('this server has no reconcile endpoint (POST /api/reconcile answered 404)');
    } finally {
      old.close();
    }
  });
});

describe('operations on a VM', () => {
  it('stop, set, start, status, list and schedules each do what the API does, and say so', async () => {
    expect(firstVm).toBeDefined();
    const id = String(firstVm!.vmid);
    const ok = async (args: string[]) => {
      const r = await runCli(url, args);
      expect({ args, code: r.exitCode, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
      return r.stdout;
    };
    expect(await ok(['stop', id])).toBe('ok');
    expect(await ok(['set', 'cpu', id, '2'])).toBe('ok');
    const started = (await ok(['start', id])).split('\n');
    expect(started.at(-1)).toMatch(/^VM start > finalizing: \[\+\] /);
    expect(await ok(['status', id])).toBe('running');
    const list = JSON.parse(await ok(['--json', 'list', '--running'])) as { list: Array<{ vmid: number; cpu: number }> };
    expect(list.list.find((v) => v.vmid === firstVm!.vmid)).toMatchObject({ cpu: 2 });

    const refused = await runCli(url, ['start', id]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toBe('qemurun: 400: VM is running');

    const created = JSON.parse(await ok(['--json', 'schedules', 'create', '--vmid', id, '--interval', '6h', '--paused', '--note', 'cli'])) as { schedule: { id: string } };
    expect(created.schedule.id).toBe(`rebuild-vm-${id}`);
    expect(await ok(['schedules', 'list'])).toMatch(new RegExp(`^rebuild-vm-${id} +${id} +every 6h +yes `, 'm'));
    const trigger = await runCli(url, ['schedules', 'trigger', `rebuild-vm-${id}`]);
    expect(trigger.exitCode).toBe(1);
    expect(trigger.stderr).toMatch(/^qemurun: 409: .*paused/);
    expect(JSON.parse(await ok(['--json', 'schedules', 'delete', `rebuild-vm-${id}`]))).toMatchObject({ success: true });
  });
});
