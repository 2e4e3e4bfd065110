import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { failure } from '../contract';
import { outputStream } from './output';
import { managedNodeOf } from './managedSet';
import { recordedTask } from './tasks';

export interface DiskDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** A VM's disks: the image imported as its boot disk, a disk's size, growing a disk. */
export function diskActivities({ config, proxmox, client }: DiskDeps) {
  const main = () => proxmox.main();
  const managedNode = (vmid: number, instance?: string) => managedNodeOf(config, proxmox, vmid, undefined, instance);

  return {
    /**
     * Imports the image once: a retry finds the disk already attached or unused, or (API
     * mode) follows the import task the attempt before started.
     */
    async importDisk(input: { vmid: number; imagePath: string; storage?: string }): Promise<string> {
      const node = main();
      const task = recordedTask();
      if (!task.resumeTask) {
        const conf = await node.config(input.vmid);
        const existing = conf.disks.find((d) => d.key === 'scsi0' || d.key.startsWith('unused'));
        if (existing) return existing.volid;
      }
      const out = outputStream(client);
      try {
        return await node.importDisk(input.vmid, input.imagePath, input.storage ?? config.storage, {
          ...task,
          onProgress: (line) => out.line(line),
          signal: Context.current().cancellationSignal,
        });
      } finally {
        await out.close();
      }
    },

    /** The size of a disk in bytes, from the VM's config. */
    async diskSize(input: { vmid: number; disk: string; instance?: string }): Promise<number> {
      const conf = await (await managedNode(input.vmid, input.instance)).config(input.vmid);
      const disk = conf.disks.find((d) => d.key === input.disk);
      if (!disk || disk.cdrom || disk.sizeBytes === undefined) {
        throw failure('InvalidRequestError', `VM ${input.vmid} has no ${input.disk} disk with a known size`);
      }
      return disk.sizeBytes;
    },

    /** `qm resize` to an absolute size: resizing to the size a disk has is a no-op. */
    async growDisk(input: { vmid: number; disk: string; sizeBytes: number; instance?: string }): Promise<void> {
      await (await managedNode(input.vmid, input.instance)).resize(input.vmid, input.disk, sizeArgument(input.sizeBytes));
    },
  };
}

/** The largest unit that expresses `bytes` exactly: `32G`, `20992M`, or plain bytes. */
export function sizeArgument(bytes: number): string {
  for (const [unit, factor] of [['T', 1024 ** 4], ['G', 1024 ** 3], ['M', 1024 ** 2], ['K', 1024]] as const) {
    if (bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return String(bytes);
}
