import { staticAddressOf } from './address';
import type { Client } from '@temporalio/client';
import { checkInput, type FailureType, type InstallSpec, installSpecSchema, InvalidInputError, type RebuildTarget } from '../../contract';
import type { Config } from '../config';
import type { ProxmoxCluster } from '../proxmox';
import { readDisabledVmids, stateFiles } from '../stateFiles';
import { diskTooBig } from './diskSpace';
import { vmInstanceOf } from '../proxmox/vmInstance';
import { markerSealFor, sealedSpec } from './markerSeal';
import { describeUndecoded } from '../temporal/workflowDescription';

export interface RebuildCheckDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** Why a VM may not be rebuilt: the API answers it with a status, the workflow fails with its type. */
export class RebuildRefusal extends Error {
  constructor(
    readonly type: Extract<FailureType, 'VmDisabledError' | 'VmNotFoundError' | 'VmInstanceError' | 'NotOwnedError' | 'VmBusyError' | 'InvalidRequestError' | 'StorageError'>,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

/**
 * Decides whether a VM may be rebuilt, and from what. Refuses (RebuildRefusal, nothing
 * touched) a disabled VMID, a missing VM (unless a spec is given: then it is installed),
 * a container, a VM without the product's sealed owner marker or, when no spec is given,
 * without its sealed spec marker, a VM whose install is still running, and a spec the API
 * would refuse or clamp (bounds, VM_MAX_*) or that does not fit in the storage. Used by the
 * workflow's check and by the API before it starts one.
 */
export async function inspectVmForRebuild(
  { config, proxmox, client }: RebuildCheckDeps,
  input: { vmid: number; spec?: InstallSpec; instance?: string },
): Promise<RebuildTarget> {
  const { vmid } = input;
  if (readDisabledVmids(config.dataDir).has(vmid)) {
    throw new RebuildRefusal('VmDisabledError', `VM ${vmid} is disabled (listed in ${stateFiles(config.dataDir).disabled}); it cannot be rebuilt through the API`);
  }
  const found = await proxmox.locateGuest(vmid);
  if (!found) {
    // The VM the rebuild was asked for is gone: what stands at the VMID later is no business of it.
    if (input.instance !== undefined) throw new RebuildRefusal('VmInstanceError', `VM ${vmid} (SMBIOS uuid ${input.instance}), which this rebuild was asked for, no longer exists`);
    if (input.spec) return { exists: false, vmid, spec: { ...checkedSpec(input.spec, 'spec'), vmid }, mainNode: config.mainNode };
    throw new RebuildRefusal('VmNotFoundError', `VM ${vmid} does not exist`);
  }
  if (found.type !== 'qemu') throw new RebuildRefusal('NotOwnedError', `${vmid} is a container, not a VM QemuRun installed; refusing to rebuild it`);
  const node = proxmox.requireNode(found.node);
  const conf = await node.config(vmid);
  const label = `VM ${vmid}${conf.name ? ` (${conf.name})` : ''}`;
  const instance = vmInstanceOf(conf);
  if (input.instance !== undefined && instance !== input.instance) {
    throw new RebuildRefusal(
      'VmInstanceError',
      `${label} is not the VM this rebuild was asked for: its SMBIOS uuid is ${instance ?? 'unset'}, not ${input.instance} (the VMID was reused); refusing to rebuild it`,
    );
  }
  const markers = markerSealFor(config).check(conf, vmid);
  if (!markers.sealed) {
    const why = markers.owner === undefined ? 'its description has no qemurun-owner marker' : `its qemurun-owner marker is not trusted: ${markers.reason}`;
    throw new RebuildRefusal('NotOwnedError', `${label} was not installed by QemuRun: ${why}; refusing to rebuild it`);
  }
  // A template is rebuilt by its own workflow (POST /api/templates), which keeps the old one while linked clones use it.
  if (markers.fields.template !== undefined || conf.entries.template === '1') {
    throw new RebuildRefusal('NotOwnedError', `${label} is a template: build a new one with POST /api/templates (the old one is retired once no linked clone uses it); refusing to rebuild it`);
  }
  const { owner, run: ownerRun } = markers.fields;
  // An install still running owns the VM it is building (its run is in the owner marker):
  // a rebuild now would destroy it under the install's feet. Described raw: an install whose
  // memo was sealed with a key since dropped runs all the same, and the SDK's decoding
  // describe would fail on it and pass for "not running".
  const installing = await describeUndecoded(client, owner, ownerRun).catch(() => undefined);
  if (installing?.status === 'RUNNING') {
    throw new RebuildRefusal('VmBusyError', `${label} is still being built by ${installing.type} (workflow ${owner}); try again when it has finished`);
  }
  const recorded = input.spec ?? sealedSpec(markers);
  if (!recorded) {
    throw new RebuildRefusal('NotOwnedError', `${label} has no readable qemurun-spec marker, so there is nothing to rebuild it from; refusing to rebuild it`);
  }
  const checked = await checkSpec(config, proxmox, recorded, input.spec ? 'spec' : `${label}'s qemurun-spec marker`, found.node === config.mainNode ? conf.disks : []);
  const recordedNode = checked.node ?? config.mainNode;
  const spec: InstallSpec = { ...checked, vmid };
  // A VM with a pool address is re-created on it: its install asks for it by name, and the
  // pool hands a lease over to a new install only so (workflows/addressPool.ts).
  const address = staticAddressOf(conf.entries.ipconfig0);
  if (spec.addressPool !== undefined && spec.ip === undefined && address !== undefined) spec.ip = address;
  // A VM migrated since its install is rebuilt where it lives now (a spec given with the
  // request says where it belongs, and wins).
  const moved = !input.spec && recordedNode !== found.node;
  if (moved) spec.node = found.node;
  return {
    exists: true,
    vmid,
    node: found.node,
    owner,
    ownerRun,
    ...(instance !== undefined ? { instance } : {}),
    spec,
    ...(moved ? { movedFrom: recordedNode } : {}),
    status: await node.status(vmid),
    mainNode: config.mainNode,
  };
}

/**
 * A spec read back from a marker is input like any other: the API's bounds, the operator's
 * VM_MAX_* limits (a rebuild refuses what an install would clamp: it re-creates the VM as
 * recorded or not at all) and the free space of its storage (ASSIGN_STORAGE unless it names one), counting the disks the
 * destroy frees when the VM lives on the main node. Nothing is touched before this passes.
 */
async function checkSpec(config: Config, proxmox: ProxmoxCluster, recorded: unknown, what: string, disks: Array<{ volid: string; sizeBytes?: number }>): Promise<InstallSpec> {
  const spec = checkedSpec(recorded, what);
  const { maxCpu, maxRamMb, maxDiskGb } = config.limits;
  const over = [
    maxCpu && spec.cores > maxCpu ? `cores ${spec.cores} is more than VM_MAX_CPU (${maxCpu})` : undefined,
    maxRamMb && spec.ramMb > maxRamMb ? `ramMb ${spec.ramMb} is more than VM_MAX_RAM (${maxRamMb})` : undefined,
    maxDiskGb && spec.diskGb > maxDiskGb ? `diskGb ${spec.diskGb} is more than VM_MAX_DISK (${maxDiskGb})` : undefined,
  ].filter((x) => x !== undefined);
  if (over.length > 0) throw new RebuildRefusal('InvalidRequestError', `${what}: ${over.join('; ')}; refusing to rebuild`);
  // The spec's own storage when it names one, else ASSIGN_STORAGE.
  const storageId = spec.storage ?? config.storage;
  const storage = await proxmox
    .main()
    .storageStatus({ storage: storageId })
    .then((list) => list.find((s) => s.name === storageId))
    .catch(() => undefined);
  if (!storage) return spec; // the install's storage step says why, before it creates anything
  const freed = disks.filter((d) => d.volid.startsWith(`${storageId}:`));
  const freedBytes = freed.reduce((sum, d) => sum + (d.sizeBytes ?? 0), 0);
  // The extra data disks the spec puts on the same storage need room too, as the freed ones count.
  const extraGb = (spec.disks ?? []).filter((d) => (d.storage ?? storageId) === storageId).reduce((sum, d) => sum + d.sizeGb, 0);
  const tooBig = diskTooBig(spec.diskGb + extraGb, { ...storage, availableBytes: storage.availableBytes + freedBytes });
  if (tooBig) throw new RebuildRefusal('StorageError', `${what}: ${tooBig}; refusing to rebuild`);
  return spec;
}

/** The spec as the install schema reads it: checked, in today's names (a spec written before `cores` says `cpu`). */
function checkedSpec(spec: unknown, what: string): InstallSpec {
  try {
    return checkInput(installSpecSchema, spec, what);
  } catch (err) {
    if (err instanceof InvalidInputError) throw new RebuildRefusal('InvalidRequestError', `${err.message}; refusing to rebuild`);
    throw err;
  }
}
