import type { Route } from '../http';
import { clusterResources, NETWORK_TYPES, nextId, nodeNetwork, nodeStatus, poolIndex, poolRead } from '../../cli/pvesh';
import { fromCli } from '../errors';
import { nodePveVersion } from '../../state/model';
import { nodeResource } from '../../cli/resources';
import { CPU_MODELS } from '../../cli/formats';
import * as f from '../../cli/formats';

/** Cluster-wide and node reads: /version, /cluster/resources, /cluster/nextid, /nodes... */

const VENDORS: Record<string, string> = { EPYC: 'AuthenticAMD', Opteron: 'AuthenticAMD', athlon: 'AuthenticAMD', phenom: 'AuthenticAMD' };

export const clusterRoutes: Route[] = [
  // `/version` is answered by the node that serves the request (pve-manager PVE/API2.pm,
  // `version`: PVE::pvecfg::version_info() of the local node): the sandbox's one server
  // stands for the main node's pveproxy. Anyone authenticated may ask (`user => 'all'`).
  { method: 'GET', path: '/version', handle: (r) => nodePveVersion(r.ctx().model, r.ctx().model.mainNode) },
  // A given node's (pve-manager PVE/API2/Nodes.pm, `version`, proxyto => 'node', user => 'all').
  { method: 'GET', path: '/nodes/{node}/version', handle: (r) => nodePveVersion(r.ctx().model, r.params.node) },
  {
    method: 'GET',
    path: '/cluster/resources',
    props: { type: { type: 'string', optional: true, enum: ['vm', 'storage', 'node', 'sdn', 'pool'] } },
    // Everyone may ask; each entry is shown only to who may see it (pve-manager
    // PVE/API2/Cluster.pm, `resources`): a VM with VM.Audit on it; a storage with
    // Datastore.Audit on it (Datastore.AllocateSpace alone does not show it); a node always,
    // its usage (cpu, mem, disk, uptime and their maxima) only with Sys.Audit on it
    // (PVE/API2Tools.pm, `extract_node_stats`'s `$exclude_stats`).
    handle: (r) =>
      (clusterResources(r.ctx(), r.params.type) as Array<Record<string, unknown>>).flatMap((e) => {
        if (e.type === 'qemu') return r.can(`/vms/${String(e.vmid)}`, ['VM.Audit']) ? [e] : [];
        if (e.type === 'node') {
          if (r.can(`/nodes/${String(e.node)}`, ['Sys.Audit'])) return [e];
          const { cpu, mem, disk, uptime, maxcpu, maxmem, maxdisk, ...rest } = e;
          void cpu, mem, disk, uptime, maxcpu, maxmem, maxdisk;
          return [rest];
        }
        if (e.type === 'storage') return r.can(`/storage/${String(e.storage)}`, ['Datastore.Audit']) ? [e] : [];
        if (e.type === 'pool') return r.can(`/pool/${String(e.pool)}`, ['Pool.Audit']) ? [e] : [];
        return [e];
      }),
  },
  {
    method: 'GET',
    path: '/cluster/nextid',
    props: { vmid: { type: 'integer', optional: true, format: f.vmidFormat } },
    handle: (r) => nextId(r.ctx(), r.params.vmid),
  },
  // pve-manager PVE/API2/Pool.pm: `index` lists the pools the caller has Pool.Audit on;
  // `read_pool` needs it on the pool (an unknown pool: 500 `pool '$pool' does not exist`).
  { method: 'GET', path: '/pools', handle: (r) => poolIndex(r.ctx()).filter((p) => r.can(`/pool/${p.poolid}`, ['Pool.Audit'])) },
  {
    method: 'GET',
    path: '/pools/{poolid}',
    handle: (r) => {
      r.check(`/pool/${r.params.poolid}`, ['Pool.Audit']);
      try {
        return poolRead(r.ctx(), r.params.poolid);
      } catch (e) {
        throw fromCli(e);
      }
    },
  },
  { method: 'GET', path: '/nodes', handle: (r) => r.ctx().model.nodes.map((n) => nodeResource(r.ctx(), n, true)) },
  {
    method: 'GET',
    path: '/nodes/{node}/status',
    handle: (r) => {
      r.check(`/nodes/${r.params.node}`, ['Sys.Audit']);
      return nodeStatus(r.ctx(), r.params.node);
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/network',
    props: { type: { type: 'string', optional: true, enum: NETWORK_TYPES } },
    // `permissions => { user => 'all' }`: any authenticated user may ask, but a Linux or
    // OVS bridge is listed only to who has SDN.Audit or SDN.Use on it in the localnetwork
    // zone (pve-manager PVE/API2/Network.pm `index`, "always check bridge access", on 8.4
    // and 9 alike: pve-access-control RPCEnvironment.pm `check_sdn_bridge`). The sandbox
    // has no SDN vnets, which `get_local_vnets` filters the same way.
    handle: (r) =>
      nodeNetwork(r.ctx(), r.params.node, r.params.type).filter(
        (i) => !['bridge', 'OVSBridge'].includes(i.type) || r.canUseBridge('localnetwork', i.iface, ['SDN.Audit', 'SDN.Use']),
      ),
  },
  {
    method: 'GET',
    path: '/nodes/{node}/capabilities/qemu/cpu',
    props: { arch: { type: 'string', optional: true, enum: ['x86_64', 'aarch64'] } },
    // Everyone may list the built-in models (only custom ones are filtered).
    handle: () => {
      return CPU_MODELS.filter((m) => m !== 'host').map((name) => ({
        custom: 0,
        name,
        vendor: Object.entries(VENDORS).find(([k]) => name.startsWith(k))?.[1] ?? (/^(kvm|qemu|x86-64|max)/.test(name) ? 'default' : 'GenuineIntel'),
      })).concat([{ custom: 0, name: 'host', vendor: 'default' }]);
    },
  },
];
