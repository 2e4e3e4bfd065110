import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import type { Metrics } from '../lib/observability/metrics';
import type { ProxmoxCluster } from '../lib/proxmox';
import type { Activities } from '../contract';
import { clusterActivities } from './cluster';
import { imageActivities } from './images';
import { vmActivities } from './vm';
import { diskActivities } from './disk';
import { migrationActivities } from './migration';
import { powerActivities } from './power';
import { guestActivities } from './guest';
import { guestAddressActivities } from './guestAddress';
import { rebuildActivities } from './rebuild';
import { temporalActivities } from './temporal';
import { reconcileActivities } from './reconcile';
import { addressPoolActivities } from './addressPools';
import { templateActivities } from './templates';
import { heartbeating } from './keepAlive';

export interface ActivityDeps {
  config: Config;
  /**
   * One executor per Proxmox node: local for the main node when we run on it, SSH otherwise.
   * Empty in API mode, where no node is reached over SSH.
   */
  executors: Record<string, NodeExecutor>;
  /** The nodes as ProxmoxNodes: through the executors (CLI mode) or the REST API. */
  proxmox: ProxmoxCluster;
  /** Lets long activities stream command output into their workflow's progress. */
  client: Client;
  /** Image cache hits, misses and bytes downloaded are counted here. */
  metrics?: Metrics;
}

/**
 * Every activity of the product, as plain async functions closed over their
 * dependencies, implementing the interface in contract/activities.ts. An activity's name
 * in the Temporal UI is its property name, and its file is named for what it acts on:
 * the cluster (storage, CPU baseline, VMIDs), images, the VM itself (create, options,
 * adopt, destroy), its disks, its migration, its power state, the guest over SSH, a
 * rebuild's checks, Temporal itself, the reconciler. All heartbeat while they run (so a
 * dead worker is noticed in seconds) but relayProgress, whose own heartbeats carry its
 * resume point.
 */
export function createActivities(deps: ActivityDeps): Activities {
  const { relayProgress, ...temporal } = temporalActivities(deps);
  return {
    ...heartbeating({
      ...clusterActivities(deps),
      ...imageActivities(deps),
      ...vmActivities(deps),
      ...diskActivities(deps),
      ...migrationActivities(deps),
      ...powerActivities(deps),
      ...guestActivities(deps),
      ...guestAddressActivities(deps),
      ...rebuildActivities(deps),
      ...temporal,
      ...reconcileActivities(deps),
      ...addressPoolActivities(deps),
      ...templateActivities(deps),
    }),
    relayProgress,
  };
}
