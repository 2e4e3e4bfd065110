import type { NodeExecutor } from '../executor/types';
import { CliNode } from './cli';
import { ApiNode } from './api/node';
import { PveApi as PveApiClient, type PveApi } from './api/http';
import type { ProxmoxMode, ProxmoxNode } from './node';

export type { ProxmoxNode, ProxmoxMode, CallOptions, TaskOptions } from './node';
export { CliNode } from './cli';
export { ApiNode } from './api/node';

/**
 * The cluster's nodes as ProxmoxNodes, the one way activities and routes reach Proxmox.
 * CLI mode knows the nodes it has an executor for; API mode reaches any node of the
 * cluster through the API, so every name is answered (Proxmox itself refuses an unknown one).
 */
export interface ProxmoxCluster {
  readonly mode: ProxmoxMode;
  /** The node, or undefined when CLI mode has no executor for it. */
  node(name: string): ProxmoxNode | undefined;
  close(): Promise<void>;
}

export function cliCluster(executors: Record<string, NodeExecutor>): ProxmoxCluster {
  const nodes = new Map<string, CliNode>();
  return {
    mode: 'cli',
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
  };
}

export function apiCluster(api: PveApi, options: { pollMs?: number } = {}): ProxmoxCluster {
  const nodes = new Map<string, ApiNode>();
  return {
    mode: 'api',
    node(name) {
      let node = nodes.get(name);
      if (!node) nodes.set(name, (node = new ApiNode(api, name, options)));
      return node;
    },
    async close() {
      api.close();
    },
  };
}

/** The API-only calls (images fetched by the node), when this node is reached through the API. */
export function asApiNode(node: ProxmoxNode): ApiNode | undefined {
  return node instanceof ApiNode ? node : undefined;
}

/** Settings of API mode, as lib/config reads them. */
export interface ProxmoxApiSettings {
  urls: string[];
  token: string;
  ca?: string;
  fingerprint?: string;
  insecure: boolean;
}

/**
 * The cluster as configured: through the REST API when its settings are given, else
 * through the executors. `warn` hears about an API whose certificate is not checked.
 */
export function connectCluster(
  settings: ProxmoxApiSettings | undefined,
  executors: Record<string, NodeExecutor>,
  warn: (message: string) => void = console.warn,
): ProxmoxCluster {
  if (!settings) return cliCluster(executors);
  if (settings.insecure) {
    warn(
      'WARNING: PROXMOX_API_INSECURE is set: the Proxmox API certificate is NOT checked, so anyone on the path to ' +
        `${settings.urls.join(', ')} can pose as the cluster and receive the API token. Pin it with PROXMOX_API_FINGERPRINT or trust its CA with PROXMOX_API_CA_FILE.`,
    );
  }
  return apiCluster(new PveApiClient(settings));
}
