import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config';
import { LocalExecutor } from './local';
import type { Spawner } from './spawner';
import { SshExecutor } from './ssh';
import type { NodeExecutor } from './types';

export { LocalExecutor } from './local';
export { SshExecutor } from './ssh';
export { Spawner } from './spawner';
export * from './types';

export interface ExecutorsOptions {
  /** Starts the local main node's commands. */
  spawner: Spawner;
  /**
   * Environment merged into main-node commands. Only meaningful locally, so giving it
   * makes the main node local (the sandbox puts its bin dir with qm first on PATH).
   */
  mainNodeEnv?: Record<string, string>;
  /**
   * Whether main-node commands run on this machine. Default: yes in sandbox mode or with
   * `mainNodeEnv`; otherwise when this machine is the main node (its hostname is the node
   * name, or it owns the node's address). A deployment off the cluster (docker-compose)
   * thus reaches the main node over SSH like any other.
   */
  mainNodeLocal?: boolean;
  /** Where `known_hosts` is kept. Default `<DATA_DIR>/ssh`. */
  knownHostsDir?: string;
}

type ExecutorConfig = Pick<Config, 'nodes' | 'mainNode' | 'sandbox' | 'sshKeyPath' | 'nodeSshUser' | 'dataDir'>;

/** One executor per node: local for the main node when the service runs on it, SSH otherwise. */
export function createExecutors(config: ExecutorConfig, opts: ExecutorsOptions): Record<string, NodeExecutor> {
  const mainLocal =
    opts.mainNodeLocal ??
    (config.sandbox || opts.mainNodeEnv !== undefined || isThisMachine(config.mainNode, config.nodes[config.mainNode]));
  const executors: Record<string, NodeExecutor> = {};
  for (const node of new Set([config.mainNode, ...Object.keys(config.nodes)])) {
    if (node === config.mainNode && mainLocal) {
      executors[node] = new LocalExecutor(node, { spawner: opts.spawner, env: opts.mainNodeEnv });
      continue;
    }
    const address = config.nodes[node];
    if (!address) throw new Error(`no address for node '${node}' (set NODE_${node})`);
    executors[node] = new SshExecutor({
      node,
      host: address.host,
      port: address.port,
      username: config.nodeSshUser,
      privateKeyPath: config.sshKeyPath,
      knownHostsDir: opts.knownHostsDir ?? path.join(config.dataDir, 'ssh'),
    });
  }
  return executors;
}

/**
 * A Proxmox node's name is its hostname, and its management address is its own. An
 * address of ours with an SSH port other than 22 is not this node's management SSH but
 * a tunnel or a simulated node (npm run sandbox): reached over SSH like any other.
 */
function isThisMachine(node: string, address: { host: string; port: number } | undefined): boolean {
  if (os.hostname().split('.')[0] === node) return true;
  if (address === undefined || address.port !== 22) return false;
  return Object.values(os.networkInterfaces()).some((addrs) => addrs?.some((a) => a.address === address.host));
}
