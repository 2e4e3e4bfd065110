import os from 'node:os';
import { parseArgs, type Prop } from './args';
import { CliError, paramError } from './errors';
import type { Ctx } from './context';
import * as f from './formats';
import { nodeBridges, nodeOf, nodePveVersion, storagesOn } from '../state/model';
import { listVms } from '../state/vmlist';
import { configDigest, parseConf } from '../state/vmconf';
import { readIfExists } from '../state/files';
import { clusterGuestResource, guestResource, guests, nodeResource, nodeUsage, storageResource } from './resources';
import { toJson, toJsonPretty, toText } from './output';
import { VM_OPTIONS } from './vmOptions';
import { agentFileRead } from './agentFile';
import { poolMembers } from '../state/pools';

/**
 * `pvesh get <path>` for the API paths the service reads. Output is the API's `data`
 * member only; JSON keys sorted; numbers Perl held as strings (cpuinfo.mhz, loadavg,
 * nextid) stay strings.
 */
interface Route {
  path: RegExp;
  props?: Record<string, Prop>;
  get(ctx: Ctx, m: RegExpExecArray, params: Record<string, string>): unknown;
}

/** The one guest agent call QemuRun makes: the guest's host key (see ./agentFile). */
const agentFileRoute: Route = {
  path: /^\/nodes\/([^/]+)\/qemu\/(\d+)\/agent\/file-read$/,
  props: { file: { type: 'string' } },
  get: (ctx, m, p) => agentFileRead(ctx, m[1], Number(m[2]), p.file),
};

function requireNode(ctx: Ctx, name: string) {
  const n = nodeOf(ctx.model, name);
  if (!n) throw new CliError(`hostname lookup '${name}' failed - failed to get address info for: ${name}: Name or service not known`);
  return n;
}

export function nodeStatus(ctx: Ctx, name: string): unknown {
  const n = requireNode(ctx, name);
  if (!n.online) throw new CliError(`500 Can't connect to ${n.ip}:8006 (No route to host)`);
  const u = nodeUsage(ctx, n);
  const kernelVersion = `#1 SMP PREEMPT_DYNAMIC PMX ${ctx.model.kernel.replace(/-pve$/, '')} (2024-12-03T10:26Z)`;
  const swap = 8 * 1024 ** 3;
  return {
    'boot-info': { mode: 'efi', secureboot: 0 },
    cpu: u.cpu,
    cpuinfo: {
      cores: n.cpu.cores,
      cpus: n.cpu.threads,
      flags: n.cpu.flags,
      hvm: '1',
      mhz: n.cpu.mhz,
      model: n.cpu.model,
      sockets: n.cpu.sockets,
      user_hz: 100,
    },
    'current-kernel': { machine: 'x86_64', release: ctx.model.kernel, sysname: 'Linux', version: kernelVersion },
    idle: 0,
    ksm: { shared: 0 },
    kversion: `Linux ${ctx.model.kernel} ${kernelVersion}`,
    loadavg: os.loadavg().map((l) => l.toFixed(2)),
    memory: { free: n.memoryBytes - u.mem, total: n.memoryBytes, used: u.mem },
    pveversion: ((v) => `pve-manager/${v.version}/${v.repoid}`)(nodePveVersion(ctx.model, n.name)),
    rootfs: { avail: n.rootfsBytes - n.rootfsUsedBytes, free: n.rootfsBytes - n.rootfsUsedBytes, total: n.rootfsBytes, used: n.rootfsUsedBytes },
    swap: { free: swap, total: swap, used: 0 },
    uptime: u.uptime,
    wait: 0.0004,
  };
}

export function clusterResources(ctx: Ctx, type: string | undefined): unknown[] {
  const out: unknown[] = [];
  if (!type || type === 'vm') out.push(...guests(ctx).map((g) => clusterGuestResource(ctx, g)));
  if (!type || type === 'node') out.push(...ctx.model.nodes.map((n) => nodeResource(ctx, n, false)));
  if (!type || type === 'storage') {
    for (const n of ctx.model.nodes) for (const s of storagesOn(ctx.model, n.name)) out.push(storageResource(ctx, s, n.name));
  }
  if (!type || type === 'pool') {
    for (const p of poolIndex(ctx)) out.push({ id: `/pool/${p.poolid}`, pool: p.poolid, type: 'pool', ...(p.comment !== undefined ? { comment: p.comment } : {}) });
  }
  if (!type || type === 'sdn') {
    for (const n of ctx.model.nodes) out.push({ id: `sdn/${n.name}/localnetwork`, node: n.name, sdn: 'localnetwork', status: 'ok', type: 'sdn' });
  }
  return out;
}

/** pve-manager PVE/API2/Pool.pm `index`: `[{ poolid, comment? }]`, sorted by id. */
export function poolIndex(ctx: Ctx): Array<{ poolid: string; comment?: string }> {
  return [...(ctx.model.pools ?? [])].sort((a, b) => a.poolid.localeCompare(b.poolid)).map((p) => ({ ...p }));
}

/** Pool.pm `read_pool`: its members as `/cluster/resources` entries; an unknown pool is `pool '$pool' does not exist`. */
export function poolRead(ctx: Ctx, poolid: string): { comment?: string; members: unknown[] } {
  const pool = (ctx.model.pools ?? []).find((p) => p.poolid === poolid);
  if (!pool) throw new CliError(`pool '${poolid}' does not exist`);
  const members = new Set(poolMembers(ctx.dir, poolid));
  const vms = guests(ctx)
    .filter((g) => members.has(g.vmid))
    .map((g) => ({ ...clusterGuestResource(ctx, g), pool: poolid }));
  return { ...(pool.comment !== undefined ? { comment: pool.comment } : {}), members: vms };
}

/** The interface types of pve-manager's PVE/API2/Network.pm `index` (its `type` filter). */
export const NETWORK_TYPES = ['bridge', 'bond', 'eth', 'alias', 'vlan', 'OVSBridge', 'OVSBond', 'OVSPort', 'OVSIntPort', 'any_bridge'];

/**
 * `GET /nodes/{node}/network` (pve-manager PVE/API2/Network.pm `index`, proxied to the
 * node) as root sees it (the REST API leaves out the bridges a token may not use): the interfaces of the node's /etc/network/interfaces, `lo`
 * left out, as `hash_to_array(..., 'iface')`: the installer's `eno1` and the node's Linux
 * bridges on it, each up. `type` keeps one type (`any_bridge`: Linux and OVS bridges).
 */
export function nodeNetwork(ctx: Ctx, node: string, type: string | undefined): Array<{ iface: string; type: string }> {
  const n = requireNode(ctx, node);
  if (!n.online) throw new CliError(`500 Can't connect to ${n.ip}:8006 (No route to host)`);
  const bridges = nodeBridges(ctx.model, node);
  const ifaces = [
    { iface: 'eno1', type: 'eth', active: 1, autostart: 1, exists: 1, families: ['inet'], method: 'manual', method6: 'manual', priority: 3 },
    ...bridges.map((b, i) => ({
      iface: b,
      type: 'bridge',
      active: 1,
      autostart: 1,
      bridge_fd: '0',
      bridge_ports: i === 0 ? 'eno1' : '',
      bridge_stp: 'off',
      families: ['inet'],
      method: i === 0 ? 'static' : 'manual',
      method6: 'manual',
      priority: 4 + i,
    })),
  ];
  return ifaces.filter((i) => !type || i.type === type || (type === 'any_bridge' && i.type === 'bridge'));
}

/**
 * pve-manager PVE/API2/Cluster.pm `nextid`: `returns => { type => 'integer' }`, yet the
 * answer is a JSON string (`"100"`) on 8.4 and 9.x alike: `$idlist->{$i}` caches `$i`'s
 * string form (SVp_POK) just before `return $i`, and JSON::XS encodes such a scalar as a
 * string; `vmid` comes back as it was passed. docs/sandbox.md has the details.
 */
export function nextId(ctx: Ctx, vmid: string | undefined): string {
  const used = new Set(listVms(ctx.dir).map((v) => v.vmid));
  if (vmid !== undefined) {
    if (used.has(Number(vmid))) throw paramError({ vmid: `VM ${vmid} already exists` }, 'pvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]');
    return vmid;
  }
  for (let id = 100; id < 1_000_000; id++) if (!used.has(id)) return String(id);
  throw new CliError('unable to get any free VMID in range [100, 999999]');
}

export function vmConfOn(ctx: Ctx, node: string, vmid: number) {
  requireNode(ctx, node);
  const raw = readIfExists(ctx.paths.conf(node, vmid));
  if (raw === undefined) throw new CliError(`Configuration file '${ctx.paths.confDisplay(node, vmid)}' does not exist`);
  return parseConf(raw);
}

/** What the API's read paths answer; pvesh and the REST API share them. `/version` is the answering node's. */
function version(ctx: Ctx) {
  return nodePveVersion(ctx.model, ctx.node);
}

export function vmStatusCurrent(ctx: Ctx, node: string, vmid: number) {
  vmConfOn(ctx, node, vmid);
  const g = guests(ctx).find((x) => x.vmid === vmid)!;
  const { id, node: _node, type, ...rest } = guestResource(g);
  void id, _node, type;
  return { ...rest, qmpstatus: rest.status, ha: { managed: 0 } };
}

export function vmConfigView(ctx: Ctx, node: string, vmid: number) {
  const conf = vmConfOn(ctx, node, vmid);
  const raw = readIfExists(ctx.paths.conf(node, vmid)) ?? '';
  const out: Record<string, unknown> = { digest: configDigest(raw) };
  // parse_vm_config's check_type: integer and boolean options are numbers (memory has been a
  // property string since PVE 8.1).
  for (const [k, v] of Object.entries(conf.props)) {
    const type = VM_OPTIONS[k]?.type;
    out[k] = k !== 'memory' && (type === 'integer' || type === 'boolean') && /^-?\d+$/.test(v) ? Number(v) : v;
  }
  if (conf.description !== undefined) out.description = conf.description;
  if (out.cipassword !== undefined) out.cipassword = '**********';
  return out;
}

export function nodeStorages(ctx: Ctx, node: string) {
  requireNode(ctx, node);
  return storagesOn(ctx.model, node).map((s) => {
    const r = storageResource(ctx, s, node);
    const used = (r.disk as number | undefined) ?? 0;
    const total = (r.maxdisk as number | undefined) ?? 0;
    return {
      active: s.active ? 1 : 0,
      avail: total - used,
      content: r.content,
      enabled: s.enabled ? 1 : 0,
      shared: 0,
      storage: s.id,
      total,
      type: s.type,
      used,
      used_fraction: total ? used / total : 0,
    };
  });
}

const ROUTES: Route[] = [
  { path: /^\/nodes$/, get: (ctx) => ctx.model.nodes.map((n) => nodeResource(ctx, n, true)) },
  { path: /^\/nodes\/([^/]+)\/status$/, get: (ctx, m) => nodeStatus(ctx, m[1]) },
  { path: /^\/nodes\/([^/]+)\/network$/, props: { type: { type: 'string', optional: true, enum: NETWORK_TYPES } }, get: (ctx, m, p) => nodeNetwork(ctx, m[1], p.type) },
  {
    path: /^\/nodes\/([^/]+)\/qemu$/,
    get: (ctx, m) => {
      requireNode(ctx, m[1]);
      return guests(ctx)
        .filter((g) => g.node === m[1])
        .map((g) => {
          const { id, node, type, ...rest } = guestResource(g);
          void id, node, type;
          return rest;
        });
    },
  },
  { path: /^\/nodes\/([^/]+)\/qemu\/(\d+)\/status\/current$/, get: (ctx, m) => vmStatusCurrent(ctx, m[1], Number(m[2])) },
  { path: /^\/nodes\/([^/]+)\/qemu\/(\d+)\/config$/, get: (ctx, m) => vmConfigView(ctx, m[1], Number(m[2])) },
  { path: /^\/nodes\/([^/]+)\/storage$/, get: (ctx, m) => nodeStorages(ctx, m[1]) },
  agentFileRoute,
  {
    path: /^\/cluster\/resources$/,
    props: { type: { type: 'string', optional: true, enum: ['vm', 'storage', 'node', 'sdn', 'pool'] } },
    get: (ctx, _m, p) => clusterResources(ctx, p.type),
  },
  {
    path: /^\/cluster\/nextid$/,
    props: { vmid: { type: 'integer', optional: true, format: f.vmidFormat } },
    get: (ctx, _m, p) => nextId(ctx, p.vmid),
  },
  { path: /^\/version$/, get: (ctx) => version(ctx) },
  { path: /^\/pools$/, get: (ctx) => poolIndex(ctx) },
  { path: /^\/pools\/(.+)$/, get: (ctx, m) => poolRead(ctx, m[1]) },
  // pve-manager's PVE/API2/Nodes.pm `version` (proxyto node): the named node's, not the answering one's.
  { path: /^\/nodes\/([^/]+)\/version$/, get: (ctx, m) => (requireNode(ctx, m[1]), nodePveVersion(ctx.model, m[1])) },
];

const FORMAT_PROPS: Record<string, Prop> = {
  'output-format': { type: 'string', optional: true, enum: ['text', 'json', 'json-pretty', 'yaml'] },
  noborder: { type: 'boolean', optional: true },
  noheader: { type: 'boolean', optional: true },
  'human-readable': { type: 'boolean', optional: true },
  quiet: { type: 'boolean', optional: true },
};

export async function pvesh(ctx: Ctx, argv: string[]): Promise<number> {
  const [verb, rawPath, ...rest] = argv;
  const verbs = ['get', 'ls', 'set', 'create', 'delete', 'usage'];
  if (!verb || !verbs.includes(verb)) {
    throw new CliError(`ERROR: ${verb ? `unknown command 'pvesh ${verb}'` : 'no command specified'}\nUSAGE: pvesh <COMMAND> [ARGS] [OPTIONS]\n`);
  }
  const usage = `pvesh ${verb} <api_path> [OPTIONS] [FORMAT_OPTIONS]`;
  if (rawPath === undefined) throw new CliError(`400 not enough arguments\n${usage}`);
  const path = '/' + rawPath.replace(/^\/+|\/+$/g, '');
  const route = ROUTES.map((r) => ({ r, m: r.path.exec(path) })).find((x) => x.m);
  if (!route || verb !== 'get') throw new CliError(`No '${verb}' handler defined for '${path}'`);
  const params = parseArgs({ name: `pvesh ${verb}`, args: [], props: { ...route.r.props, ...FORMAT_PROPS }, usage }, rest);
  const data = await route.r.get(ctx, route.m!, params);

  const format = params['output-format'] ?? 'text';
  if (format === 'json') ctx.out(toJson(data));
  else if (format === 'json-pretty' || format === 'yaml') ctx.out(toJsonPretty(data));
  else {
    const text = toText(data, params.noborder !== '1', params.noheader !== '1');
    if (text !== '') ctx.out(text);
  }
  return 0;
}
