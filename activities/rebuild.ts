import type { Client } from '@temporalio/client';
import { failure, type InstallSpec, type RebuildTarget } from '../contract';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { inspectVmForRebuild, RebuildRefusal } from '../lib/vm/rebuildTarget';

export interface RebuildDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** What a rebuild must know before it destroys anything: whether it may, and the secrets the new VM keeps. */
export function rebuildActivities({ config, proxmox, client }: RebuildDeps) {
  return {
    /** The workflow's check: inspectVmForRebuild, with a refusal made non-retryable. */
    async inspectRebuildTarget(input: { vmid: number; spec?: InstallSpec; instance?: string }): Promise<RebuildTarget> {
      try {
        return await inspectVmForRebuild({ config, proxmox, client }, input);
      } catch (err) {
        if (err instanceof RebuildRefusal) throw failure(err.type, err.message);
        throw err;
      }
    },

    /**
     * The cloud-init password the re-created VM gets when the rebuild names none: the hash
     * the VM has now (`qm cloudinit dump`: qm config shows only stars), so a rebuild never
     * resets a password; with none there, no usable password (or the seed's default, with
     * UNSAFE_DEFAULT_PASSWORDS). Read before the VM is destroyed.
     */
    async keptCiPassword(input: { vmid: number; node?: string }): Promise<{ passwdHash?: string; passwd?: string }> {
      const node = input.node ? proxmox.node(input.node) : undefined;
      const hash = node ? await node.ciPasswordHash(input.vmid) : undefined;
      if (hash) return { passwdHash: hash };
      return config.defaultCiPassword ? { passwd: config.defaultCiPassword } : {};
    },

    /** The root password for the OS init script, read when the rebuild runs (never stored in a schedule). */
    async initRootPassword(): Promise<{ rootPassword?: string }> {
      return config.rootPassword ? { rootPassword: config.rootPassword } : {};
    },
  };
}
