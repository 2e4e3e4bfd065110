import type { Client } from '@temporalio/client';
import { type FailureType, type InstallSpec, OS_VERSIONS, ownerOf, type RebuildTarget, specOf } from '../../contract';
import type { Config } from '../config';
import type { ProxmoxCluster } from '../proxmox';
import { readDisabledVmids, stateFiles } from '../stateFiles';

export interface RebuildCheckDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** Why a VM may not be rebuilt: the API answers it with a status, the workflow fails with its type. */
export class RebuildRefusal extends Error {
  constructor(
    readonly type: Extract<FailureType, 'VmDisabledError' | 'VmNotFoundError' | 'NotOwnedError' | 'VmBusyError'>,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

/**
 * Decides whether a VM may be rebuilt, and from what. Refuses (RebuildRefusal, nothing
 * touched) a disabled VMID, a missing VM (unless a spec is given: then it is installed),
 * a container, and a VM without the product's owner marker or, when no spec is given,
 * without its spec marker, and a VM whose install is still running. Used by the workflow's
 * check and by the API before it starts one.
 */
export async function inspectVmForRebuild(
  { config, proxmox, client }: RebuildCheckDeps,
  input: { vmid: number; spec?: InstallSpec },
): Promise<RebuildTarget> {
  const { vmid } = input;
  if (readDisabledVmids(config.dataDir).has(vmid)) {
    throw new RebuildRefusal('VmDisabledError', `VM ${vmid} is disabled (listed in ${stateFiles(config.dataDir).disabled}); it cannot be rebuilt through the API`);
  }
  const found = await proxmox.locateGuest(vmid);
  if (!found) {
    if (input.spec) return { exists: false, vmid, spec: { ...input.spec, vmid }, mainNode: config.mainNode };
    throw new RebuildRefusal('VmNotFoundError', `VM ${vmid} does not exist`);
  }
  if (found.type !== 'qemu') throw new RebuildRefusal('NotOwnedError', `${vmid} is a container, not a VM QemuRun installed; refusing to rebuild it`);
  const node = proxmox.requireNode(found.node);
  const conf = await node.config(vmid);
  const label = `VM ${vmid}${conf.name ? ` (${conf.name})` : ''}`;
  const owner = ownerOf(conf.description);
  if (!owner) {
    throw new RebuildRefusal('NotOwnedError', `${label} was not installed by QemuRun: its description has no qemurun-owner marker; refusing to rebuild it`);
  }
  // An install still running owns the VM it is building (its id is in the owner marker):
  // a rebuild now would destroy it under the install's feet.
  const installing = await client.workflow
    .getHandle(owner)
    .describe()
    .catch(() => undefined);
  if (installing?.status.name === 'RUNNING') {
    throw new RebuildRefusal('VmBusyError', `${label} is still being built by ${installing.type} (workflow ${owner}); try again when it has finished`);
  }
  const recorded = input.spec ?? specOf(conf.description);
  if (!recorded || !(OS_VERSIONS[recorded.os] as readonly string[] | undefined)?.includes(recorded.version)) {
    throw new RebuildRefusal('NotOwnedError', `${label} has no readable qemurun-spec marker, so there is nothing to rebuild it from; refusing to rebuild it`);
  }
  const recordedNode = recorded.node ?? config.mainNode;
  const spec: InstallSpec = { ...recorded, vmid };
  // A VM migrated since its install is rebuilt where it lives now (a spec given with the
  // request says where it belongs, and wins).
  const moved = !input.spec && recordedNode !== found.node;
  if (moved) spec.node = found.node;
  return {
    exists: true,
    vmid,
    node: found.node,
    owner,
    spec,
    ...(moved ? { movedFrom: recordedNode } : {}),
    status: await node.status(vmid),
    mainNode: config.mainNode,
  };
}
