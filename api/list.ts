import { z } from 'zod';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import type { NodeResource, VmResource } from '../lib/proxmox/pvesh';
import { readDisabledVmids } from '../lib/stateFiles';
import type { Client } from '@temporalio/client';
import { LIMITS, OS_VERSIONS } from '../contract';
import { readLeasesOr502 } from './poolLeases';
import { vmIp } from '../lib/network';
import { HttpError, InvalidRequestError } from './errors';
import { tenantScope } from './guard';
import { tenantOfVm } from './tenancy';
import { markerSealFor } from '../lib/vm/markerSeal';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

/**
 * `GET /vm/list`: the seed's body, from ONE `pvesh get /cluster/resources` (VMs and nodes
 * in the same answer). Disabled VMIDs are left out; `?disable=0` keeps running VMs only,
 * `?disable=1` stopped ones only (the seed's odd name is kept).
 */

export interface ListRouteDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

export interface VmListEntry {
  vmid: number;
  name: string;
  os: string;
  running: boolean;
  node: string;
  /** vCPUs. */
  cpu: number;
  /** GiB, whole numbers (truncated). */
  disk: number;
  memory: number;
  memory_used: number;
  /**
   * With address pools: the VM's IPv4 address, its pool lease, else GATEWAY's /24 plus the
   * VMID (VMIDs up to 254); absent for a VM with neither, and without pools (the seed's
   * entries). `address_pool` names the pool of a lease.
   */
  ip?: string;
  address_pool?: string;
}

export interface NodeListEntry {
  node: string;
  max_cpu: number;
  /** GiB, two decimals. */
  max_memory: number;
  /** Percent of the node's capacity allocated to the listed VMs, two decimals. */
  cpu: number;
  memory: number;
  memory_used: number;
  /** GiB of the node's root disk, two decimals. */
  disk: number;
  running: boolean;
}

const GiB = 1024 ** 3;
const round2 = (n: number) => Math.round(n * 100) / 100;
const percent = (part: number, whole: number | undefined) => (whole ? round2((part / whole) * 100) : 0);

/** The OS tag the install wrote (`debian`, ...), else the first tag. */
function osOf(tags: string[]): string {
  return tags.find((t) => Object.hasOwn(OS_VERSIONS, t)) ?? tags[0] ?? '';
}

function vmList(
  vms: VmResource[],
  nodes: NodeResource[],
  opts: { disabled: Set<number>; filter?: 'running' | 'stopped'; addressOf: (vmid: number) => { ip?: string; address_pool?: string } },
): { count: number; list: VmListEntry[]; cluster: NodeListEntry[]; data: VmListEntry[] } {
  const listed = vms
    .filter((v) => v.type === 'qemu' && !v.template && !opts.disabled.has(v.vmid))
    .filter((v) => opts.filter === undefined || (v.status === 'running') === (opts.filter === 'running'))
    .sort((a, b) => a.vmid - b.vmid);
  const list = listed.map(
    (v): VmListEntry => ({
      vmid: v.vmid,
      name: v.name ?? '',
      os: osOf(v.tags),
      running: v.status === 'running',
      node: v.node,
      cpu: v.maxcpu ?? 0,
      disk: Math.floor((v.maxdisk ?? 0) / GiB),
      memory: Math.floor((v.maxmem ?? 0) / GiB),
      memory_used: Math.floor((v.mem ?? 0) / GiB),
      ...opts.addressOf(v.vmid),
    }),
  );
  const cluster = [...nodes]
    .sort((a, b) => a.node.localeCompare(b.node))
    .map((n): NodeListEntry => {
      const on = listed.filter((v) => v.node === n.node);
      const sum = (f: (v: VmResource) => number | undefined) => on.reduce((s, v) => s + (f(v) ?? 0), 0);
      return {
        node: n.node,
        max_cpu: Math.round(n.maxcpu ?? 0),
        max_memory: round2((n.maxmem ?? 0) / GiB),
        cpu: percent(sum((v) => v.maxcpu), n.maxcpu),
        memory: percent(sum((v) => v.maxmem), n.maxmem),
        memory_used: percent(sum((v) => v.mem), n.maxmem),
        disk: round2((n.maxdisk ?? 0) / GiB),
        running: n.status === 'online',
      };
    });
  return { count: list.length, list, cluster, data: list };
}

/** How many `qm config` reads a tenant's listing runs at once. */
const CONFIG_READS = 4;

/**
 * The VMs of `tenant` among `vms` (api/tenancy.ts): one config read per VM, a few at a
 * time. A VM whose config cannot be read is left out: a listing never shows a VM it cannot
 * tell is the caller's.
 */
async function ofTenant(deps: { config: Config; proxmox: ProxmoxCluster; client: Client }, vms: VmResource[], tenant: string): Promise<VmResource[]> {
  const seal = markerSealFor(deps.config);
  const keep = new Set<VmResource>();
  const queue = vms.filter((v) => v.type === 'qemu' && !v.template);
  const worker = async () => {
    for (let v = queue.shift(); v !== undefined; v = queue.shift()) {
      const conf = await deps.proxmox.node(v.node)?.config(v.vmid).catch(() => undefined);
      if (!conf) continue;
      const check = seal.check(conf, v.vmid);
      // MANAGE_ALL_VMS opens the VMs QemuRun did not install to every operate token: they are listed too.
      if (!check.sealed && deps.config.manageAllVms) keep.add(v);
      else if ((await tenantOfVm({ client: deps.client, tokens: deps.config.apiTokens }, v.vmid, check)) === tenant) keep.add(v);
    }
  };
  await Promise.all(Array.from({ length: CONFIG_READS }, worker));
  return vms.filter((v) => keep.has(v));
}

export const listRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: ListRouteDeps) => deps,
  routes: [
    {
      method: 'GET',
      path: '/vm/list',
      summary: 'VMs and node allocation',
      query: { disable: { schema: z.enum(['0', '1']), description: '`0` running VMs only, `1` stopped VMs only' } },
      answers: { 200: { description: 'the VMs', json: answers.vmList }, 400: err('`disable` is not 0 or 1'), 502: err('the cluster could not be read') },
      handle: async ({ config, proxmox, client }, req, res) => {
        const disable = req.query.disable;
        if (disable !== undefined && disable !== '0' && disable !== '1') {
          throw new InvalidRequestError('disable: must be 0 (running VMs) or 1 (stopped VMs)');
        }
        const result = await proxmox.main().resources({ timeoutMs: 60_000 }).catch((err: Error) => err);
        if (result instanceof Error) {
          throw new HttpError(502, `could not read the cluster: ${result.message}`);
        }
        // One query per address pool, not one config read per VM: the leases say who has what.
        const leases = await readLeasesOr502(client, config.addressPools, "the address pools' leases");
        const byVmid = new Map<number, { ip: string; address_pool: string }>();
        for (const [pool, held] of leases) for (const l of held) if (l.vmid !== undefined) byVmid.set(l.vmid, { ip: l.address, address_pool: pool });
        // A token of the read or operate role lists its tenant's VMs only; admin, every VM.
        const scope = tenantScope(res);
        const vms = scope === undefined ? result.vm : await ofTenant({ config, proxmox, client }, result.vm, scope);
        res.json(
          vmList(vms, result.node, {
            disabled: readDisabledVmids(config.dataDir),
            filter: disable === '0' ? 'running' : disable === '1' ? 'stopped' : undefined,
            // Without pools the entries stay the seed's: their address is the formula's anyway.
            addressOf: (vmid) =>
              config.addressPools.length === 0 ? {} : (byVmid.get(vmid) ?? (vmid <= LIMITS.installVmid.max ? { ip: vmIp(config.gateway, vmid) } : {})),
          }),
        );
      },
    },
  ],
});
