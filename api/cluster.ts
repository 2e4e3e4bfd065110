import { Router, Request, Response } from 'express';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import { ProxmoxNode } from '../lib/proxmox/client';
import { cpuBaseline } from '../activities/proxmox';
import { requireMutationAccess } from './guard';
import { HttpError } from './errors';

export interface ClusterRouteDeps {
  config: Config;
  executors: Record<string, NodeExecutor>;
}

/**
 * `POST /cluster/cpu/refresh`: detects the cluster CPU baseline again now (after a node's
 * hardware changed, or to replace a type pinned by hand) and caches it. Installs also
 * detect it again by themselves when the set of online nodes changes.
 */
export function clusterRoutes({ config, executors }: ClusterRouteDeps): Router {
  const router = Router();

  router.post('/cluster/cpu/refresh', requireMutationAccess(config), async (_req: Request, res: Response) => {
    try {
      const baseline = await cpuBaseline(new ProxmoxNode(executors[config.mainNode]), config.dataDir, { refresh: true });
      res.json({ success: true, cpu: baseline.cpuType, nodes: baseline.nodes });
    } catch (err) {
      throw new HttpError(502, `could not detect the CPU baseline: ${(err as Error).message}`);
    }
  });

  return router;
}
