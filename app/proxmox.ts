import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { PermissionDeniedError } from '../lib/proxmox/errors';
import { StartupError, reason } from '../lib/startupError';

/**
 * The node names requests may name. CLI mode: the nodes with an executor. API mode: the
 * cluster's, asked at start-up, which also tells a wrong token at once; a cluster that
 * cannot be reached now falls back to the configured names (NODE_<name>, MAIN_NODE).
 */
export async function clusterNodes(proxmox: ProxmoxCluster, config: Config, executors: Record<string, unknown>): Promise<string[]> {
  if (proxmox.mode === 'cli') return Object.keys(executors);
  try {
    return (await proxmox.main().nodes({ timeoutMs: 15_000 })).map((n) => n.node);
  } catch (err) {
    if (err instanceof PermissionDeniedError) {
      throw new StartupError(`the Proxmox API refuses PROXMOX_API_TOKEN: ${err.message}\ncheck the token and its privileges (docs/proxmox-api.md)`);
    }
    console.warn(`cannot list the cluster's nodes through the Proxmox API yet (${reason(err).split('\n')[0]}); accepting the configured ones`);
    return [...new Set([config.mainNode, ...Object.keys(config.nodes)])];
  }
}
