import type { Client } from '@temporalio/client';
import { createActivities } from '../../activities';
import type { Config } from '../../lib/config';
import type { ProxmoxCluster } from '../../lib/proxmox';
import type { RenamedActivities } from '../../contract';

/**
 * Installs started before qmCreate and mainNodeKey were renamed schedule them under those
 * names, on replay and after an upgrade (workflows/install.ts): the worker must still run
 * them, as the very activities of their new names.
 */
test('the worker registers the names of earlier versions as aliases of the renamed activities', () => {
  // Building the activities touches none of their dependencies.
  const activities = createActivities({ config: {} as Config, executors: {}, proxmox: {} as ProxmoxCluster, client: {} as Client });
  const renamed: Record<keyof RenamedActivities, unknown> = { qmCreate: activities.createVm, mainNodeKey: activities.servicePublicKey };
  for (const [old, current] of Object.entries(renamed)) {
    expect(typeof current).toBe('function');
    expect(activities[old as keyof RenamedActivities]).toBe(current);
  }
});
