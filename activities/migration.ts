import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { onVmNode, type ProxmoxCluster } from '../lib/proxmox';
import { field, checkedInput } from '../contract';
import { outputStream } from './output';
import { knownNode, requireManagedConfig } from './managedSet';
import { recordedTask } from './tasks';
import { carryUserSnippet } from './userSnippet';
import { parseUpid } from '../lib/proxmox/api/tasks';

export interface MigrationDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** Moving a VM to another node of the cluster, its output streamed into the progress. */
export function migrationActivities({ config, proxmox, client }: MigrationDeps) {
  return {
    /**
     * Migrates to `target`. After a crash the retry finds the VM there already, or (API
     * mode) follows the migration task still running rather than starting another.
     * `node`: where the workflow made the VM (absent in inputs of earlier versions), asked
     * first; the cluster's resources only when the VM is not there.
     */
    async migrateVm(input: { vmid: number; target: string; node?: string }): Promise<void> {
      const { vmid, target } = input;
      checkedInput(field.node, target, 'migrateVm');
      const known = knownNode(input, 'migrateVm');
      const task = recordedTask();
      // The task's node (in its UPID) is the source, where the VM's config may no longer
      // be; a task that failed left the VM there, and the retry starts anew from it.
      const source = task.resumeTask ? parseUpid(task.resumeTask)?.node : undefined;
      const vm = source ? undefined : await onVmNode(proxmox, vmid, known, async (node) => ({ node, conf: await node.config(vmid) }));
      if (vm?.node.node === target && !task.resumeTask) return; // done before a crash
      if (vm) requireManagedConfig(config, vmid, vm.conf);
      const node = vm?.node ?? proxmox.requireNode(source!);
      const out = outputStream(client);
      try {
        if (task.resumeTask) out.line(`[*] following the migration task the previous attempt started (${task.resumeTask})`);
        // qemu-server reads a cicustom snippet at start on the node the VM runs on.
        if (!task.resumeTask && proxmox.mode === 'cli') await carryUserSnippet(proxmox, node, vmid, target, vm?.conf);
        await node.migrate(vmid, target, {
          ...task,
          withLocalDisks: true,
          onLine: (line) => out.line(line),
          signal: Context.current().cancellationSignal,
        });
      } finally {
        await out.close();
      }
    },
  };
}
