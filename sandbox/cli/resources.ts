import fs from 'node:fs';
import type { Ctx } from './context';
import type { NodeDef, StorageDef } from '../state/model';
import { listVms } from '../state/vmlist';
import { vmProcess } from '../state/runtime';
import { parseConf, type VmConf } from '../state/vmconf';
import { readIfExists } from '../state/files';
import { usedBytes } from './storage';
import { bootDisk } from '../state/boot';
import { poolOf } from '../state/pools';
import { parseDrive, parseSize } from './qm/vm';

/**
 * The numbers the API reports about nodes, guests and storages, derived from the sandbox
 * state: node memory grows with the VMs running on it, guest maxdisk is the boot disk's
 * size, storage usage is the sum of its volumes.
 */

export interface GuestInfo {
  vmid: number;
  node: string;
  conf: VmConf;
  running: boolean;
  uptime: number;
  /** When the VMID was claimed (ms): pvestatd has not reported a VM newer than its cycle. */
  createdAt: number;
  /** When the VM became a template (ms; 0: never, or long ago): pvestatd reports it a cycle later. */
  templatedAt: number;
}

export function guests(ctx: Ctx): GuestInfo[] {
  const out: GuestInfo[] = [];
  for (const { vmid, node } of listVms(ctx.dir)) {
    const raw = readIfExists(ctx.paths.conf(node, vmid));
    if (raw === undefined) continue;
    const proc = vmProcess(ctx.dir, vmid);
    const createdAt = mtimeMs(ctx.paths.vmlistEntry(vmid));
    const templatedAt = mtimeMs(ctx.paths.templatedAt(vmid));
    out.push({ vmid, node, conf: parseConf(raw), running: !!proc, uptime: proc ? Math.floor((Date.now() - proc.startedAt) / 1000) : 0, createdAt, templatedAt });
  }
  return out;
}

function mtimeMs(file: string): number {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * A VM as `/cluster/resources` lists it. Its numbers and status come from the RRD data
 * pvestatd broadcasts every 10 s: a VM it has not reported yet has only its ids and
 * `status: unknown` (pve-manager PVE/API2Tools.pm `extract_vm_stats`), plus the `tags`
 * and `lock` PVE/API2/Cluster.pm `resources` reads from its config. The sandbox's
 * `statusLagMs` is how long that lasts after a create. `template` is one of those
 * reported fields (pvestatd reads it from the config each cycle): a VM just turned into a
 * template still shows `template: 0` for `statusLagMs` after its conversion began.
 */
export function clusterGuestResource(ctx: Ctx, g: GuestInfo): Record<string, unknown> {
  // A member of a pool names it (pve-manager Cluster.pm `resources`: `pool` from user.cfg).
  const pool = poolOf(ctx.dir, ctx.model, g.vmid);
  const lag = ctx.model.statusLagMs ?? 0;
  if (Date.now() - g.createdAt >= lag) {
    const reported = Date.now() - g.templatedAt >= lag ? {} : { template: 0 };
    return { ...guestResource(g), ...reported, ...(pool ? { pool } : {}) };
  }
  const r: Record<string, unknown> = { id: `qemu/${g.vmid}`, node: g.node, status: 'unknown', type: 'qemu', vmid: g.vmid };
  if (g.conf.props.tags) r.tags = g.conf.props.tags;
  if (g.conf.props.lock) r.lock = g.conf.props.lock;
  return r;
}

export const maxmem = (conf: VmConf) => Number(conf.props.memory ?? 512) * 1024 * 1024;
const maxcpu = (conf: VmConf) => Number(conf.props.vcpus ?? Number(conf.props.cores ?? 1) * Number(conf.props.sockets ?? 1));

export function maxdisk(conf: VmConf): number {
  const key = bootDisk(conf);
  const size = key ? parseDrive(conf.props[key]).opts.size : undefined;
  return size ? parseSize(size) ?? 0 : 0;
}

export function guestResource(g: GuestInfo): Record<string, unknown> {
  const mm = maxmem(g.conf);
  const r: Record<string, unknown> = {
    cpu: g.running ? 0.0123 : 0,
    disk: 0,
    diskread: 0,
    diskwrite: 0,
    id: `qemu/${g.vmid}`,
    maxcpu: maxcpu(g.conf),
    maxdisk: maxdisk(g.conf),
    maxmem: mm,
    mem: g.running ? Math.floor(mm * 0.35) : 0,
    name: g.conf.props.name ?? `VM ${g.vmid}`,
    netin: 0,
    netout: 0,
    node: g.node,
    status: g.running ? 'running' : 'stopped',
    template: g.conf.props.template === '1' ? 1 : 0,
    type: 'qemu',
    uptime: g.uptime,
    vmid: g.vmid,
  };
  if (g.conf.props.tags) r.tags = g.conf.props.tags;
  if (g.conf.props.lock) r.lock = g.conf.props.lock;
  return r;
}

export function nodeUsage(ctx: Ctx, n: NodeDef) {
  const running = guests(ctx).filter((g) => g.node === n.name && g.running);
  return {
    mem: n.memoryUsedBytes + running.reduce((s, g) => s + Math.floor(maxmem(g.conf) * 0.35), 0),
    cpu: Math.min(1, 0.0213 + running.length * 0.01),
    uptime: Math.floor(Date.now() / 1000) - ctx.model.bootedAt,
  };
}

export function nodeResource(ctx: Ctx, n: NodeDef, withFingerprint: boolean): Record<string, unknown> {
  const base: Record<string, unknown> = { id: `node/${n.name}`, node: n.name, status: n.online ? 'online' : 'offline', type: 'node' };
  if (withFingerprint) base.ssl_fingerprint = n.sslFingerprint;
  if (!n.online) return base;
  const u = nodeUsage(ctx, n);
  return {
    ...base,
    cpu: u.cpu,
    disk: n.rootfsUsedBytes,
    level: '',
    maxcpu: n.cpu.threads,
    maxdisk: n.rootfsBytes,
    maxmem: n.memoryBytes,
    mem: u.mem,
    uptime: u.uptime,
  };
}

export function storageResource(ctx: Ctx, s: StorageDef, node: string): Record<string, unknown> {
  const r: Record<string, unknown> = {
    content: [...s.content].sort().join(','),
    id: `storage/${node}/${s.id}`,
    node,
    plugintype: s.type,
    shared: 0,
    status: s.active && s.enabled ? 'available' : 'unknown',
    storage: s.id,
    type: 'storage',
  };
  if (s.active && s.enabled) {
    r.disk = usedBytes(ctx, s, node);
    r.maxdisk = s.totalBytes;
  }
  return r;
}
