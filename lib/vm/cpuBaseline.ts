import type { ProxmoxNode } from '../proxmox';
import { FALLBACK_CPU_TYPE, clusterBaseline, cpuLevel } from '../proxmox/cpu';
import { readCachedCpuBaseline, writeCachedCpuType } from '../stateFiles';

export interface CpuBaseline {
  cpuType: string;
  /** Online nodes the type was detected on; empty after a fallback. */
  nodes: string[];
  source: 'cache' | 'detected' | 'fallback';
}

/**
 * The cluster CPU baseline, cached in the data dir. The cache is used while the cluster's
 * online nodes are those it was detected on; a node joining, leaving or going offline
 * makes it detect again. A cached type without a node list (the seed's file, or one an
 * operator wrote by hand) is kept as it is until `refresh`. When detection fails the
 * baseline is `kvm64`, cached with no nodes so that the next call tries again; with
 * `refresh` a failure is thrown instead and the cache is left alone.
 */
export async function cpuBaseline(
  main: ProxmoxNode,
  dataDir: string,
  opts: { refresh?: boolean; onFallback?: (error: string) => void } = {},
): Promise<CpuBaseline> {
  const cached = readCachedCpuBaseline(dataDir);
  if (!opts.refresh && cached && cached.nodes === undefined) return { cpuType: cached.cpuType, nodes: [], source: 'cache' };
  const fallback = (err: unknown): CpuBaseline => {
    if (opts.refresh) throw err;
    opts.onFallback?.(String(err));
    writeCachedCpuType(dataDir, FALLBACK_CPU_TYPE, []);
    return { cpuType: FALLBACK_CPU_TYPE, nodes: [], source: 'fallback' };
  };
  let online: string[];
  try {
    online = (await main.nodes())
      .filter((n) => n.status === 'online')
      .map((n) => n.node)
      .sort();
  } catch (err) {
    // The node list could not be read: the last detection is the best knowledge there is.
    if (!opts.refresh && cached?.nodes && cached.nodes.length > 0) return { cpuType: cached.cpuType, nodes: cached.nodes, source: 'cache' };
    return fallback(err);
  }
  if (!opts.refresh && cached?.nodes && sameList(cached.nodes, online)) return { cpuType: cached.cpuType, nodes: online, source: 'cache' };
  try {
    const levels = await Promise.all(online.map(async (n) => cpuLevel((await main.nodeStatus(n)).cpuinfo.flags)));
    const cpuType = clusterBaseline(levels);
    writeCachedCpuType(dataDir, cpuType, online);
    return { cpuType, nodes: online, source: 'detected' };
  } catch (err) {
    return fallback(err);
  }
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
