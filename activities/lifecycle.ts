import { ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../lib/proxmox';
import { balloonFor } from './proxmox';
import { requireManaged } from './managedSet';
import { adoptedDescription, ownerOf, workflowInputs } from '../contract';
import { checkedInput } from './checkInput';

export interface LifecycleDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * Activities for the operations on an existing VM (workflows/lifecycle.ts). Each finds
 * the node the VM lives on now and is safe to run twice: a retry after a lost completion
 * finds the goal reached and does nothing more.
 */
export function lifecycleActivities({ config, proxmox }: LifecycleDeps) {
  /** The node of a VM that exists and is in the managed set (activities/managedSet.ts). */
  async function vmNodeOrFail(vmid: number): Promise<ProxmoxNode> {
    const node = await proxmox.nodeOf(vmid);
    await requireManaged(config, node, vmid);
    return node;
  }

  return {
    /** `qm shutdown` (ACPI, qm's 60 s timeout). A stopped VM is done already. */
    async shutdownVm(input: { vmid: number }): Promise<void> {
      const node = await vmNodeOrFail(input.vmid);
      if ((await node.status(input.vmid)) === 'stopped') return;
      await node.shutdown(input.vmid);
    },

    /** `qm stop`: immediate; qm itself treats a stopped VM as done. */
    async stopVm(input: { vmid: number }): Promise<void> {
      await (await vmNodeOrFail(input.vmid)).stop(input.vmid);
    },

    /**
     * `qm destroy --purge`. The API checked that the VM exists, so a VM gone on a retry was
     * destroyed by the attempt before. A running VM fails with VmStateError.
     */
    async destroyVm(input: { vmid: number }): Promise<void> {
      const vm = await proxmox.locateVm(input.vmid);
      if (!vm) return;
      const node = proxmox.requireNode(vm.node);
      await requireManaged(config, node, input.vmid);
      await node.destroy(input.vmid, { purge: true });
    },

    async setCpu(input: { vmid: number; cores: number }): Promise<void> {
      checkedInput(workflowInputs.setCpu, input, 'setCpu');
      await (await vmNodeOrFail(input.vmid)).qmSet(input.vmid, { cores: input.cores });
    },

    /**
     * Memory with the install's balloon rule (VM_BALLOON_MIN): `--numa 1 --balloon
     * RAM-min` when it applies. When it does not, a balloon target left from before is
     * removed first, since Proxmox refuses a balloon larger than the memory.
     */
    async setMemory(input: { vmid: number; memoryMb: number }): Promise<void> {
      checkedInput(workflowInputs.setMemory, input, 'setMemory');
      const node = await vmNodeOrFail(input.vmid);
      const balloon = balloonFor(input.memoryMb, config.balloonMinMb);
      if (balloon !== undefined) {
        await node.qmSet(input.vmid, { memory: input.memoryMb, numa: 1, balloon });
        return;
      }
      const conf = await node.config(input.vmid);
      if (conf.entries.balloon !== undefined) await node.qmSet(input.vmid, { delete: 'balloon' });
      await node.qmSet(input.vmid, { memory: input.memoryMb });
    },

    /** The size of a disk in bytes, from the VM's config. */
    async diskSize(input: { vmid: number; disk: string }): Promise<number> {
      const conf = await (await vmNodeOrFail(input.vmid)).config(input.vmid);
      const disk = conf.disks.find((d) => d.key === input.disk);
      if (!disk || disk.cdrom || disk.sizeBytes === undefined) {
        throw ApplicationFailure.nonRetryable(`VM ${input.vmid} has no ${input.disk} disk with a known size`, 'InvalidRequestError');
      }
      return disk.sizeBytes;
    },

    /**
     * Takes a VM into the managed set: appends the owner marker and a dated note to its
     * description (what the operator wrote there is kept). Done already by this adoption (a
     * retry) is done; a VM already managed otherwise is refused, its owner left as it is.
     */
    async adoptVm(input: { vmid: number; owner: string; at: string; workflowId: string; runId: string; by?: string }): Promise<void> {
      const node = await proxmox.nodeOf(input.vmid);
      const conf = await node.config(input.vmid);
      const owner = ownerOf(conf.description);
      if (owner === input.owner) return;
      if (owner !== undefined) {
        throw ApplicationFailure.nonRetryable(`VM ${input.vmid} is already managed by QemuRun (qemurun-owner=${owner})`, 'AlreadyManagedError');
      }
      await node.qmSet(input.vmid, { description: adoptedDescription(conf.description, input) });
    },

    /** `qm resize` to an absolute size: resizing to the size a disk has is a no-op. */
    async growDisk(input: { vmid: number; disk: string; sizeBytes: number }): Promise<void> {
      await (await vmNodeOrFail(input.vmid)).resize(input.vmid, input.disk, sizeArgument(input.sizeBytes));
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
