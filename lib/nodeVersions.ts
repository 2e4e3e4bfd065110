import type { ProxmoxNode } from './proxmox/node';
import type { PveVersion } from './proxmox/pvesh';
import { MIN_PVE_RELEASE, supportedRelease } from './proxmox/version';
import { StartupError, reason } from './startupError';

export interface NodeVersionReport {
  /** Node name → its version, for every node that answered. */
  versions: Record<string, PveVersion>;
  /** Node name → why its version could not be read (offline, SSH refused, ...). */
  unreachable: Record<string, string>;
}

/**
 * Reads `pvesh get /version` on every node at start-up and refuses to start when one runs
 * a Proxmox VE release the install does not work on: better one line now than VMs that
 * fail half-built on that node later. A node that does not answer does not stop the
 * start (a node may be down for maintenance); readiness reports it, and it is checked at
 * the next start.
 */
export async function checkNodeVersions(nodes: ProxmoxNode[], timeoutMs = 20_000): Promise<NodeVersionReport> {
  const report: NodeVersionReport = { versions: {}, unreachable: {} };
  await Promise.all(
    nodes.map(async (node) => {
      const name = node.node;
      try {
        report.versions[name] = await node.version({ timeoutMs });
      } catch (err) {
        report.unreachable[name] = reason(err).split('\n')[0];
      }
    }),
  );
  const tooOld = Object.entries(report.versions).filter(([, v]) => !supportedRelease(v));
  if (tooOld.length > 0) {
    const which = tooOld.map(([name, v]) => `${name} runs Proxmox VE ${v.release} (pve-manager ${v.version})`).join(', ');
    throw new StartupError(
      `${which}; QemuRun needs Proxmox VE ${MIN_PVE_RELEASE} or later (installs use qm's --ciupgrade and the x86-64-v2-AES/-v3 CPU models): upgrade ${tooOld.length === 1 ? 'that node' : 'those nodes'}`,
    );
  }
  return report;
}

/**
 * What the start-up says of the nodes' releases, e.g. `Proxmox VE 9.1.1 on pve1, pve2`, or
 * `Proxmox VE 9.1.1 on pve1; 8.4.1 on pve2` in the middle of an upgrade: what an API
 * token needs depends on it (docs/proxmox-api.md gives a recipe for 9 and one for 8.4).
 */
export function describeNodeVersions(versions: Record<string, PveVersion>): string {
  const byVersion = new Map<string, string[]>();
  for (const [node, v] of Object.entries(versions).sort(([a], [b]) => a.localeCompare(b))) {
    byVersion.set(v.version, [...(byVersion.get(v.version) ?? []), node]);
  }
  if (byVersion.size === 0) return 'Proxmox VE: no node answered';
  return `Proxmox VE ${[...byVersion].map(([version, nodes]) => `${version} on ${nodes.join(', ')}`).join('; ')}`;
}
