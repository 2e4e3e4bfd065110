import { Command } from 'commander';
import { integer, vmid } from '../args';
import { readBody } from '../client';
import type { Context, Runner } from '../context';
import { followOperation, type FollowFlags } from '../operation';
import { printAnswer, table } from '../output';

interface VmListBody {
  count: number;
  list: Array<{ vmid: number; name: string; os: string; running: boolean; node: string; cpu: number; memory: number; disk: number; ip?: string; address_pool?: string }>;
  cluster: Array<{ node: string; max_cpu: number; max_memory: number; cpu: number; memory: number; running: boolean }>;
}

interface AddressPoolsBody {
  count: number;
  pools: Array<{ name: string; cidr: string; gateway: string; bridge?: string; vlan?: number; size: number; used: number; free: number; leases: Array<{ address: string; vmid?: number; owner: string }> }>;
}

function poolsText(b: AddressPoolsBody): string {
  if (b.count === 0) return 'no address pools (ADDRESS_POOLS is not set): addresses are GATEWAY\'s /24 plus the VMID';
  const pools = table(
    ['POOL', 'CIDR', 'GATEWAY', 'BRIDGE', 'VLAN', 'SIZE', 'USED', 'FREE'],
    b.pools.map((p) => [p.name, p.cidr, p.gateway, p.bridge ?? '-', p.vlan ?? '-', p.size, p.used, p.free]),
  );
  const leases = b.pools.flatMap((p) => p.leases.map((l) => [p.name, l.address, l.vmid ?? '-', l.owner]));
  return leases.length === 0 ? pools : `${pools}\n\n${table(['POOL', 'ADDRESS', 'VMID', 'OWNER'], leases)}`;
}

function listText(b: VmListBody): string {
  const vms = table(
    ['VMID', 'NAME', 'OS', 'NODE', 'STATE', 'IP', 'POOL', 'CPU', 'MEM(GiB)', 'DISK(GiB)'],
    b.list.map((v) => [v.vmid, v.name, v.os, v.node, v.running ? 'running' : 'stopped', v.ip ?? '-', v.address_pool ?? '-', v.cpu, v.memory, v.disk]),
  );
  const nodes = table(
    ['NODE', 'STATE', 'CPUS', 'MEM(GiB)', 'CPU USED', 'MEM USED'],
    b.cluster.map((n) => [n.node, n.running ? 'online' : 'offline', n.max_cpu, n.max_memory, `${n.cpu}%`, `${n.memory}%`]),
  );
  return `${b.count === 0 ? 'no VMs' : vms}\n\n${nodes}`;
}

/**
 * A POST whose answer is an event stream (start, reboot, migrate, rebuild) is followed
 * like an install; a plain answer (stop, destroy, set cpu, ...) is printed.
 */
async function post(ctx: Context, path: string, body?: unknown, flags: FollowFlags = {}): Promise<number> {
  return followOperation(ctx, (signal) => ctx.client.send('POST', path, { body, signal }), {
    ...flags,
    plainAnswer: async (res) => printAnswer(ctx, { status: res.status, headers: res.headers, body: await readBody(res) }),
  });
}

const SETTINGS: Record<string, { field: string; parse: (v: string) => unknown; help: string }> = {
  cpu: { field: 'cpu', parse: integer, help: 'cores, 1..32' },
  memory: { field: 'memory', parse: integer, help: 'MB, 512..32768' },
  disk: { field: 'disk', parse: String, help: 'grow scsi0 by this much, e.g. 16G' },
  node: { field: 'node', parse: String, help: 'migrate the (stopped) VM to this node' },
};

export function vmCommands(run: Runner): Command[] {
  const path = (id: number, op: string) => `/api/vm/${id}/${op}`;
  const follow = (c: Command) => c.option('--cancel-on-interrupt', 'Ctrl-C cancels the operation instead of detaching');

  const list = new Command('list')
    .description('the VMs and the nodes of the cluster')
    .option('--running', 'running VMs only')
    .option('--stopped', 'stopped VMs only')
    .action(
      run(async (ctx, o: { running?: boolean; stopped?: boolean }) => {
        const query = o.running ? '?disable=0' : o.stopped ? '?disable=1' : '';
        return printAnswer(ctx, await ctx.client.call('GET', `/api/vm/list${query}`), listText);
      }),
    );

  const pools = new Command('address-pools')
    .description('the address pools (ADDRESS_POOLS), how full they are and their leases')
    .action(run(async (ctx) => printAnswer(ctx, await ctx.client.call('GET', '/api/address-pools'), poolsText)));

  const status = new Command('status')
    .argument('<vmid|workflowId>', 'a VMID (its power state) or a workflow id (its status, step and result)')
    .description("a VM's power state, or an operation's status")
    .action(
      run(async (ctx, target: string) => {
        if (/^\d+$/.test(target)) return printAnswer(ctx, await ctx.client.call('GET', `/api/vm/${target}/status`));
        return printAnswer(ctx, await ctx.client.call('GET', `/api/workflows/${encodeURIComponent(target)}`));
      }),
    );

  const streamed = (name: string, help: string) =>
    follow(new Command(name).argument('<vmid>', 'VMID', vmid).description(help)).action(
      run((ctx, id: number, o: FollowFlags) => post(ctx, path(id, name), undefined, o)),
    );
  const plain = (name: string, help: string) =>
    new Command(name).argument('<vmid>', 'VMID', vmid).description(help).action(run((ctx, id: number) => post(ctx, path(id, name))));

  const set = new Command('set').description("change a stopped VM's CPU, memory, disk or node");
  for (const [what, s] of Object.entries(SETTINGS)) {
    follow(set.command(what).argument('<vmid>', 'VMID', vmid).argument('<value>', s.help, s.parse).description(`set ${what}: ${s.help}`)).action(
      run((ctx, id: number, value: unknown, o: FollowFlags) => post(ctx, path(id, `set/${what}`), { [s.field]: value }, o)),
    );
  }

  const rebuild = follow(
    new Command('rebuild')
      .argument('<vmid>', 'VMID', vmid)
      .description('re-create a VM from the spec it records (same VMID, IP, name and size)')
      .option('--passwd <password>', 'a new cloud-init password (default: keep the old one)'),
  ).action(run((ctx, id: number, o: FollowFlags & { passwd?: string }) => post(ctx, path(id, 'rebuild'), o.passwd === undefined ? undefined : { passwd: o.passwd }, o)));

  return [
    list,
    pools,
    status,
    streamed('start', 'start a stopped VM and wait until its SSH answers'),
    plain('stop', 'hard-stop a running VM'),
    plain('shutdown', 'ACPI-shut down a running VM'),
    streamed('reboot', 'reboot a running VM and wait until its SSH answers again'),
    plain('destroy', 'destroy a stopped VM and purge its disks'),
    set,
    rebuild,
  ];
}
