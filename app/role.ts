import type { Config } from '../lib/config';
import type { Logger } from '../lib/observability/log';
import { checkPortsFree } from '../lib/run/ports';
import { servicePorts } from '../lib/run/servicePorts';
import { startService } from './service';
import { describeNodeVersions } from '../lib/nodeVersions';
import { serviceSshKey } from './sshKey';

export interface RunningRole {
  /** The start-up banner. */
  banner: string[];
  stop(): Promise<void>;
}

/**
 * One half of the service (QEMURUN_ROLE=api or worker). It starts no process of its own:
 * the Temporal server and the cluster are those its settings name, shared with the other
 * processes, so any of them may die and be replaced alone.
 */
export async function startRole(config: Config, role: 'api' | 'worker', workflowBundlePath: string | undefined, logger?: Logger): Promise<RunningRole> {
  await checkPortsFree(servicePorts(config));
  // Workers log into nodes and guests; the API reads the nodes with the key if there is one
  // and never makes one (a key made on an API host would be trusted by no node).
  if (role === 'worker') serviceSshKey(config);
  const temporalAddress = config.temporal.address!;
  const service = await startService({
    config,
    temporalAddress,
    worker: role === 'worker',
    api: role === 'api',
    workflowBundlePath,
    logger,
  });
  const banner =
    role === 'api'
      ? [
          'Role:        api (no worker here: workers in other processes poll the task queue)',
          `API:         http://127.0.0.1:${config.port}/api  (health: /api/health, readiness: /api/health/ready)`,
        ]
      : [
          `Role:        worker ${service.worker?.options.identity ?? ''} (no API here)`,
          `Health:      ${service.url}/health  (readiness: /health/ready)`,
          `Cluster:     main node ${config.mainNode}, nodes ${Object.keys(config.nodes).join(', ')} (${describeNodeVersions(service.nodeVersions)})`,
        ];
  banner.push(`Temporal:    ${temporalAddress}, namespace ${config.temporal.namespace}`, `Task queue:  ${config.temporal.taskQueue}`);
  return { banner, stop: () => service.stop() };
}
