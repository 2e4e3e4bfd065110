/**
 * Typed views of the API's answers, for both implementations: `xOf(data)` types the
 * `data` member the REST API answers; `parseX(stdout)` reads what
 * `pvesh get ... --output-format json` prints (that member as JSON, no wrapper) and types
 * it so. Numbers that Perl held as strings come as JSON strings on either side
 * (`"mhz":"2999.998"`, nextid `"100"`), so every number is read with `num`.
 */

type Json = Record<string, unknown>;

export function parsePveshJson(stdout: string): unknown {
  const text = stdout.trim();
  if (text === '') throw new Error('pvesh printed nothing');
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`pvesh printed no JSON: ${JSON.stringify(text.slice(0, 200))}`);
  }
}

/** A number, or a numeric string; anything else is undefined. */
export function num(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

function objects(data: unknown, what: string): Json[] {
  if (!Array.isArray(data)) throw new Error(`${what}: expected a JSON array`);
  return data.filter((x): x is Json => typeof x === 'object' && x !== null);
}

function object(data: unknown, what: string): Json {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new Error(`${what}: expected a JSON object`);
  return data as Json;
}

export interface ClusterNode {
  node: string;
  status: 'online' | 'offline' | 'unknown' | (string & {});
  /** Fraction 0..1; online nodes only. */
  cpu?: number;
  /** Logical CPUs. */
  maxcpu?: number;
  /** Bytes. */
  mem?: number;
  maxmem?: number;
  disk?: number;
  maxdisk?: number;
  uptime?: number;
}

/**
 * `GET /nodes/{node}/network?type=any_bridge` (pve-manager PVE/API2/Network.pm `index`):
 * the names of the node's bridges, from its /etc/network/interfaces.
 */
export function bridgesOf(data: unknown): string[] {
  return objects(data, '/nodes/{node}/network')
    .map((i) => str(i.iface))
    .filter((i): i is string => i !== undefined);
}

/** `pvesh get /nodes`. */
export function parseNodes(stdout: string): ClusterNode[] {
  return nodesOf(parsePveshJson(stdout));
}

/** `GET /nodes`. */
export function nodesOf(data: unknown): ClusterNode[] {
  return objects(data, '/nodes').map((n) => ({
    node: str(n.node) ?? '',
    status: str(n.status) ?? 'unknown',
    ...optionalNumbers(n, ['cpu', 'maxcpu', 'mem', 'maxmem', 'disk', 'maxdisk', 'uptime']),
  }));
}

export interface NodeStatus {
  cpuinfo: {
    /** Logical CPUs. */
    cpus: number;
    sockets: number;
    /** Cores per socket. */
    cores: number;
    model: string;
    mhz?: number;
    /** /proc/cpuinfo flags of the first processor, e.g. `sse4_2`, `avx2`. */
    flags: string[];
  };
  /** Bytes. */
  memory: { total: number; used: number; free: number };
  /** Fraction 0..1. */
  cpu?: number;
  uptime?: number;
  loadavg: number[];
  /** `pve-manager/8.2.4/faa83925c9641325`. */
  pveversion?: string;
  kversion?: string;
}

/** `pvesh get /nodes/<node>/status`. */
export function parseNodeStatus(stdout: string): NodeStatus {
  return nodeStatusOf(parsePveshJson(stdout));
}

/** `GET /nodes/{node}/status`. */
export function nodeStatusOf(data: unknown): NodeStatus {
  const s = object(data, '/nodes/<node>/status');
  const cpuinfo = object(s.cpuinfo ?? {}, 'cpuinfo');
  const memory = object(s.memory ?? {}, 'memory');
  return {
    cpuinfo: {
      cpus: num(cpuinfo.cpus) ?? 0,
      sockets: num(cpuinfo.sockets) ?? 0,
      cores: num(cpuinfo.cores) ?? 0,
      model: str(cpuinfo.model) ?? '',
      ...(num(cpuinfo.mhz) !== undefined ? { mhz: num(cpuinfo.mhz) } : {}),
      flags: (str(cpuinfo.flags) ?? '').split(/\s+/).filter(Boolean),
    },
    memory: { total: num(memory.total) ?? 0, used: num(memory.used) ?? 0, free: num(memory.free) ?? 0 },
    ...optionalNumbers(s, ['cpu', 'uptime']),
    loadavg: Array.isArray(s.loadavg) ? s.loadavg.map((x) => num(x) ?? 0) : [],
    ...(str(s.pveversion) ? { pveversion: str(s.pveversion) } : {}),
    ...(str(s.kversion) ? { kversion: str(s.kversion) } : {}),
  };
}

export interface VmResource {
  /** `qemu/100`. */
  id: string;
  /** `--type vm` lists containers too; callers want `qemu`. */
  type: 'qemu' | 'lxc';
  vmid: number;
  name?: string;
  node: string;
  /** running, stopped, or unknown (node offline). */
  status: string;
  template: boolean;
  /** vCPUs. */
  maxcpu?: number;
  /** Bytes. */
  maxmem?: number;
  mem?: number;
  /** Bytes, boot disk size. */
  maxdisk?: number;
  cpu?: number;
  uptime?: number;
  tags: string[];
  lock?: string;
  pool?: string;
  hastate?: string;
}

export interface NodeResource {
  id: string;
  type: 'node';
  node: string;
  status: string;
  cpu?: number;
  maxcpu?: number;
  mem?: number;
  maxmem?: number;
  disk?: number;
  maxdisk?: number;
  uptime?: number;
}

export interface StorageResource {
  /** `storage/<node>/<storage>`. */
  id: string;
  type: 'storage';
  storage: string;
  node: string;
  status: string;
  plugintype?: string;
  content?: string;
  shared: boolean;
  disk?: number;
  maxdisk?: number;
}

export interface ClusterResourceByType {
  vm: VmResource;
  node: NodeResource;
  storage: StorageResource;
}

/** `pvesh get /cluster/resources --type <type>`, keeping only entries of that type. */
export function parseClusterResources<T extends keyof ClusterResourceByType>(stdout: string, type: T): ClusterResourceByType[T][] {
  return clusterResourcesOf(parsePveshJson(stdout), type);
}

/** `GET /cluster/resources?type=<type>` (or without, for all), keeping only entries of that type. */
export function clusterResourcesOf<T extends keyof ClusterResourceByType>(data: unknown, type: T): ClusterResourceByType[T][] {
  const all = objects(data, '/cluster/resources');
  const pick = {
    vm: (r: Json): VmResource | undefined =>
      r.type === 'qemu' || r.type === 'lxc'
        ? {
            id: str(r.id) ?? '',
            type: r.type,
            vmid: num(r.vmid) ?? num(str(r.id)?.split('/')[1]) ?? 0,
            ...(str(r.name) !== undefined ? { name: str(r.name) } : {}),
            node: str(r.node) ?? '',
            status: str(r.status) ?? 'unknown',
            template: num(r.template) === 1,
            ...optionalNumbers(r, ['maxcpu', 'maxmem', 'mem', 'maxdisk', 'cpu', 'uptime']),
            tags: (str(r.tags) ?? '').split(/[;,\s]+/).filter(Boolean),
            ...optionalStrings(r, ['lock', 'pool', 'hastate']),
          }
        : undefined,
    node: (r: Json): NodeResource | undefined =>
      r.type === 'node'
        ? {
            id: str(r.id) ?? '',
            type: 'node',
            node: str(r.node) ?? '',
            status: str(r.status) ?? 'unknown',
            ...optionalNumbers(r, ['cpu', 'maxcpu', 'mem', 'maxmem', 'disk', 'maxdisk', 'uptime']),
          }
        : undefined,
    storage: (r: Json): StorageResource | undefined =>
      r.type === 'storage'
        ? {
            id: str(r.id) ?? '',
            type: 'storage',
            storage: str(r.storage) ?? '',
            node: str(r.node) ?? '',
            status: str(r.status) ?? 'unknown',
            shared: num(r.shared) === 1,
            ...optionalStrings(r, ['plugintype', 'content']),
            ...optionalNumbers(r, ['disk', 'maxdisk']),
          }
        : undefined,
  }[type] as (r: Json) => ClusterResourceByType[T] | undefined;
  return all.map(pick).filter((r): r is ClusterResourceByType[T] => r !== undefined);
}

/** `pvesh get /cluster/resources` without `--type`, split by type: one read for all three. */
export function parseResources(stdout: string): { [T in keyof ClusterResourceByType]: ClusterResourceByType[T][] } {
  return resourcesOf(parsePveshJson(stdout));
}

/** `GET /cluster/resources` without `type`, split by type. */
export function resourcesOf(data: unknown): { [T in keyof ClusterResourceByType]: ClusterResourceByType[T][] } {
  return { vm: clusterResourcesOf(data, 'vm'), node: clusterResourcesOf(data, 'node'), storage: clusterResourcesOf(data, 'storage') };
}

/** `pvesh get /cluster/nextid`: `100` as text, `"100"` as JSON; both accepted. */
export function parseNextId(stdout: string): number {
  return nextIdOf(stdout.trim().replace(/^"(.*)"$/, '$1'));
}

/** `GET /cluster/nextid`: the VMID as a string (or a number). */
export function nextIdOf(data: unknown): number {
  const id = typeof data === 'string' && /^\d+$/.test(data) ? Number(data) : typeof data === 'number' && Number.isSafeInteger(data) && data > 0 ? data : undefined;
  if (id === undefined) throw new Error(`unexpected /cluster/nextid answer: ${JSON.stringify(data)?.slice(0, 100)}`);
  return id;
}

function optionalNumbers<K extends string>(o: Json, keys: K[]): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const k of keys) {
    const v = num(o[k]);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function optionalStrings<K extends string>(o: Json, keys: K[]): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const k of keys) {
    const v = str(o[k]);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/** `pvesh get /version`: `{"release":"8.3","repoid":"3e76eec21c4a14a7","version":"8.3.2"}`. */
export interface PveVersion {
  /** The major.minor release, `8.3`. */
  release: string;
  /** pve-manager's version: `8.3.2`, or `7.4-3` before Proxmox VE 8. */
  version: string;
  repoid?: string;
}

export function parseVersion(stdout: string): PveVersion {
  return versionOf(parsePveshJson(stdout));
}

/** `GET /version`, or `/nodes/{node}/version` (the named node's). */
export function versionOf(data: unknown): PveVersion {
  const v = object(data, '/version');
  const version = str(v.version);
  const release = str(v.release) ?? version?.match(/^\d+\.\d+/)?.[0];
  if (!version || !release) throw new Error('/version: no release or version');
  return { release, version, ...(str(v.repoid) ? { repoid: str(v.repoid) } : {}) };
}

/** `agent/file-read`: `{ content, bytes-read, truncated? }`; a truncated read is no whole file. */
export function parseAgentFileRead(stdout: string): string {
  return agentFileOf(parsePveshJson(stdout));
}

/** `GET .../agent/file-read`: the file's content. */
export function agentFileOf(data: unknown): string {
  const v = object(data, 'agent/file-read');
  if (typeof v.content !== 'string') throw new Error('agent/file-read: no content');
  if (v.truncated) throw new Error('agent/file-read: the file was truncated');
  return v.content;
}
