import { Router, Request, Response } from 'express';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { cpuBaseline } from '../lib/vm/cpuBaseline';
import { requireRole } from './guard';
import { HttpError } from './errors';

export interface ClusterRouteDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * `POST /cluster/cpu/refresh`: detects the cluster CPU baseline again now (after a node's
 * hardware changed, or to replace a type pinned by hand) and caches it. Installs also
 * detect it again by themselves when the set of online nodes changes.
 */
export function clusterRoutes({ config, proxmox }: ClusterRouteDeps): Router {
  const router = Router();

  router.post('/cluster/cpu/refresh', requireRole(config, 'admin'), async (_req: Request, res: Response) => {
    try {
      const baseline = await cpuBaseline(proxmox.main(), config.dataDir, { refresh: true });
      res.json({ success: true, cpu: baseline.cpuType, nodes: baseline.nodes });
    } catch (err) {
      throw new HttpError(502, `could not detect the CPU baseline: ${(err as Error).message}`);
    }
  });

  return router;
}
