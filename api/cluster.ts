import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { cpuBaseline } from '../lib/vm/cpuBaseline';
import { HttpError } from './errors';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

export interface ClusterRouteDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * `POST /cluster/cpu/refresh`: detects the cluster CPU baseline again now (after a node's
 * hardware changed, or to replace a type pinned by hand) and caches it. Installs also
 * detect it again by themselves when the set of online nodes changes.
 */
export const clusterRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: ClusterRouteDeps) => deps,
  routes: [
    {
      method: 'POST',
      path: '/cluster/cpu/refresh',
      summary: 'Detect the cluster CPU baseline now',
      role: 'admin',
      answers: { 200: { description: 'the baseline', json: answers.cpuBaseline }, 502: err('detection failed') },
      handle: async ({ config, proxmox }, _req, res) => {
        try {
          const baseline = await cpuBaseline(proxmox.main(), config.dataDir, { refresh: true });
          res.json({ success: true, cpu: baseline.cpuType, nodes: baseline.nodes });
        } catch (err) {
          throw new HttpError(502, `could not detect the CPU baseline: ${(err as Error).message}`);
        }
      },
    },
  ],
});
