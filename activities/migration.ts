import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { field } from '../contract';
import { outputStream } from './output';
import { managedNodeOf } from './managedSet';
import { checkedInput } from './checkInput';
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
  const managedNode = (vmid: number) => managedNodeOf(config, proxmox, vmid);

  return {
    /**
     * Migrates to `target`. After a crash the retry finds the VM there already, or (API
     * mode) follows the migration task still running rather than starting another.
     */
    async migrateVm(input: { vmid: number; target: string }): Promise<void> {
      checkedInput(field.node, input.target, 'migrateVm');
      const task = recordedTask();
      const current = await proxmox.locateVm(input.vmid);
      if (current?.node === input.target && !task.resumeTask) return; // done before a crash
      const out = outputStream(client);
      try {
        if (task.resumeTask) out.line(`[*] following the migration task the previous attempt started (${task.resumeTask})`);
        // The task's node (in its UPID) is the source, where the VM's config may no longer
        // be; a task that failed left the VM there, and the retry starts anew from it.
        const source = task.resumeTask ? parseUpid(task.resumeTask)?.node : undefined;
        const node = source ? proxmox.requireNode(source) : await managedNode(input.vmid);
        // qemu-server reads a cicustom snippet at start on the node the VM runs on.
        if (!task.resumeTask && proxmox.mode === 'cli') await carryUserSnippet(proxmox, node, input.vmid, input.target);
        await node.migrate(input.vmid, input.target, {
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
