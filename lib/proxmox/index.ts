import type { NodeExecutor } from '../executor/types';
import { CliNode } from './cli';
import { ApiNode } from './api/node';
import { PveApi as PveApiClient, type PveApi } from './api/http';
import type { ProxmoxNode } from './node';
import { proxmoxCluster, type ProxmoxCluster } from './cluster';

export type { ProxmoxNode, ProxmoxMode, CallOptions, TaskOptions } from './node';
export { onVmNode, proxmoxCluster, type ProxmoxCluster, type ClusterNodes } from './cluster';
export { CliNode } from './cli';
export { ApiNode } from './api/node';
export { linkedCloneSupported } from './linkedClone';
export type { QmCloneOptions } from './commands';

/**
 * CLI mode: the nodes it has an executor for (NODE_<name>, and the main node), reached
 * with qm, pvesh and pvesm.
 */
export function cliCluster(executors: Record<string, NodeExecutor>, mainNode: string): ProxmoxCluster {
  const nodes = new Map<string, CliNode>();
  return proxmoxCluster({
    mode: 'cli',
    mainNode,
    node(name) {
      const exec = executors[name];
      if (!exec) return undefined;
      let node = nodes.get(name);
      if (!node) nodes.set(name, (node = new CliNode(exec)));
      return node;
    },
    async close() {
      // The executors belong to the caller, who closes them.
    },
  });
}

/**
 * API mode: any node of the cluster, through the REST API, so every name is answered
 * (Proxmox itself refuses an unknown one).
 */
export function apiCluster(api: PveApi, mainNode: string, options: { pollMs?: number } = {}): ProxmoxCluster {
  const nodes = new Map<string, ApiNode>();
  return proxmoxCluster({
    mode: 'api',
    mainNode,
    node(name) {
      let node = nodes.get(name);
      if (!node) nodes.set(name, (node = new ApiNode(api, name, options)));
      return node;
    },
    async close() {
      api.close();
    },
  });
}

/** The API-only calls (images fetched by the node), when this node is reached through the API. */
export function asApiNode(node: ProxmoxNode): ApiNode | undefined {
  return node instanceof ApiNode ? node : undefined;
}

/** Settings of API mode, as lib/config reads them. */
export interface ProxmoxApiSettings {
  urls: readonly string[];
  token: string;
  ca?: string;
  fingerprint?: string | readonly string[];
  insecure: boolean;
}

/**
 * The cluster as configured: through the REST API when its settings are given, else
 * through the executors. `warn` hears about an API whose certificate is not checked.
 */
export function connectCluster(
  config: { mainNode: string; proxmoxApi?: ProxmoxApiSettings },
  executors: Record<string, NodeExecutor>,
  warn: (message: string) => void = console.warn,
): ProxmoxCluster {
  const settings = config.proxmoxApi;
  if (!settings) return cliCluster(executors, config.mainNode);
  if (settings.insecure) {
    warn(
      'WARNING: PROXMOX_API_INSECURE is set: the Proxmox API certificate is NOT checked, so anyone on the path to ' +
        `${settings.urls.join(', ')} can pose as the cluster and receive the API token. Pin it with PROXMOX_API_FINGERPRINT or trust its CA with PROXMOX_API_CA_FILE.`,
    );
  }
  return apiCluster(new PveApiClient(settings), config.mainNode);
}
