import { Context } from '@temporalio/activity';
import type { Config } from '../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../lib/proxmox';
import type { VmConfig } from '../lib/proxmox/vmConfig';
import { failure, type InstallSpec } from '../contract';
import { ciPasswordHashOf } from '../lib/proxmox/cipassword';
import { cicustomOf, mergedUserData, ownUserSnippet, userSnippetName, UserDataError } from '../lib/vm/userData';

/**
 * The VM's cloud-init user snippet (`userData`), as Proxmox takes custom
 * user-data: a file on a storage with the `snippets` content type, named by `cicustom
 * user=<storage>:snippets/<file>`. Snippets on a storage that is not shared exist only on
 * the node they were written on, and qemu-server reads the file at start on the node the
 * VM runs on, so a migration copies it first; destroy removes it.
 */

/** SNIPPETS_STORAGE must take snippets on `node`, or the install stops with the fix. */
async function requireSnippetsStorage(config: Config, node: ProxmoxNode): Promise<void> {
  const storage = config.snippetsStorage;
  const takesSnippets = await node.storageStatus({ content: 'snippets' });
  if (!takesSnippets.some((s) => s.name === storage)) {
    throw failure(
      'ConfigError',
      `SNIPPETS_STORAGE: storage '${storage}' on node '${node.node}' does not take snippets (Proxmox's stock 'local' does not): add them to its content, e.g. pvesm set ${storage} --content backup,iso,vztmpl,snippets (keep the types it has), or name another storage`,
    );
  }
}

/**
 * Points `cicustom` at the snippet and writes the whole user-data there (what Proxmox
 * would generate, then the caller's). Absolute: a retry sets the same option and file.
 * `options`: the VM's other options, set in the same call as `cicustom`.
 */
export async function applyUserSnippet(
  config: Config,
  node: ProxmoxNode,
  input: { vmid: number; spec: InstallSpec; userData: string; keys: string[]; passwd?: string; passwdHash?: string; hostname: string },
  options: Parameters<ProxmoxNode['setVmOptions']>[1] = {},
): Promise<void> {
  await requireSnippetsStorage(config, node);
  let text: string;
  try {
    text = mergedUserData(
      {
        hostname: input.hostname,
        searchDomain: input.spec.dns?.search,
        user: input.spec.user,
        passwordHash: ciPasswordHashOf({ cipassword: input.passwd, cipasswordHash: input.passwdHash }),
        keys: input.keys,
        packageUpgrade: false,
      },
      input.userData,
    );
  } catch (err) {
    // The API checked it with the same rules: only input it did not make gets here.
    if (err instanceof UserDataError) throw failure('InvalidRequestError', `invalid input for configureVm: ${err.message}`);
    throw err;
  }
  const cicustom = cicustomOf(config.snippetsStorage, input.vmid);
  // The option first: a cleanup after a failure in between finds the file through it (and
  // removing a file that was never written is no error).
  await node.setVmOptions(input.vmid, { ...options, cicustom });
  await node.writeSnippet(cicustom.slice('user='.length), text);
}

/**
 * Before a migration to `target`: the VM's own snippet, copied there when the target does
 * not see the same file (a storage that is not shared). Nothing to do for a VM without one.
 * `conf`: the VM's config when the caller has read it on `source` already.
 */
export async function carryUserSnippet(proxmox: ProxmoxCluster, source: ProxmoxNode, vmid: number, target: string, conf?: VmConfig): Promise<void> {
  conf ??= await source.config(vmid);
  const own = ownUserSnippet(conf.entries.cicustom, vmid);
  if (!own) return;
  const text = await source.readSnippet(own.volid);
  if (text === undefined) return; // qemu-server refuses the start on either node: nothing to carry
  const there = proxmox.requireNode(target);
  if ((await there.readSnippet(own.volid)) === text) return; // shared storage, or copied before
  await there.writeSnippet(own.volid, text);
}

/**
 * After the VM is destroyed: its own snippet (`qemurun-<vmid>-user.yaml`), from every node
 * that may hold a copy. A failure is logged, not thrown: the VM is gone, and a retry would
 * not find its `cicustom` again.
 */
export async function removeUserSnippet(proxmox: ProxmoxCluster, cicustom: string | undefined, vmid: number, nodes: string[]): Promise<void> {
  const own = ownUserSnippet(cicustom, vmid);
  if (!own) return;
  for (const name of nodes) {
    await proxmox
      .requireNode(name)
      .removeSnippet(own.volid)
      .catch((err: unknown) => Context.current().log.warn(`could not remove ${userSnippetName(vmid)} on ${name}`, { error: (err as Error).message }));
  }
}
