import {
  type BuildTemplateInput,
  type BuildTemplateResult,
  DEFAULT_USER,
  type InstallSpec,
  TEMPLATE_DISK_GB,
  type PoolAddress,
  TEMPLATE_TAG,
  templateNamePrefix,
  VM_ID,
  workflowInputs,
  installSteps,
  templateSteps,
} from '../contract';
import { deprecatePatch, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { Progress } from './progress';
import { checkedWorkflowInput } from './checkInput';
import { cleanup, guest, power, proxmox, transfer } from './activityOptions';
import { makeWithFreeVmid } from './freeVmid';
import { failWithCleanup } from './compensations';

/**
 * Deprecated: the patch by which a build carries its VM's VmId from the VM's creation
 * (the per-VM operations, api/vm/operation.ts, then find it running on the VM and refuse
 * to start beside it). Builds from before it, which held nothing, can no longer be open;
 * its marker is kept for the runs recorded with it (docs/versioning.md).
 */
const BUILD_HOLDS_ITS_VM = 'template-build-holds-its-vm';

/**
 * Deprecated, as above: the patch that leases the build's address from the first address
 * pool when pools are set, as an install naming no pool does, and gives it back once the
 * VM is a template (which never runs) or the build failed.
 */
const TEMPLATE_ADDRESS_LEASE = 'template-address-lease';

/**
 * Builds the golden template of an OS version: the cloud image as a VM, the shared
 * part of the init script (package sources, upgrade, packages, guest agent), cleaned for
 * cloning, shut down and turned into a Proxmox template that installs clone. Older templates
 * of the same OS version and storage are retired once no linked clone uses them. Runs on
 * demand (POST /api/templates) and from its schedule (TEMPLATES, TEMPLATE_SCHEDULE); its
 * workflow id is the target's, so one build per target runs at a time.
 */
export async function buildTemplate(input: BuildTemplateInput): Promise<BuildTemplateResult> {
  const target = checkedWorkflowInput(workflowInputs.buildTemplate, input) as BuildTemplateInput;
  const progress = new Progress();
  const step = progress.step.bind(progress);
  const started = Date.now();
  const { workflowId: owner, runId } = workflowInfo();
  const compensations: Array<() => Promise<void>> = [];
  const onStorage = target.storage !== undefined ? { storage: target.storage } : {};
  // What every VM of the OS version shares; the per-VM settings are each clone's own.
  const spec: InstallSpec = {
    os: target.os,
    version: target.version,
    name: templateNamePrefix(target),
    cores: 2,
    ramMb: 2048,
    diskGb: TEMPLATE_DISK_GB,
    user: DEFAULT_USER[target.os],
    tags: [TEMPLATE_TAG],
    ...onStorage,
  };

  progress.emit(installSteps.workflow.wire, 'info', `[*] workflow id: ${owner}`);
  try {
    const { recipe, storage } = await step(templateSteps.recipe.wire, 'reading what the template is built with', () => proxmox.templateRecipe(target));
    progress.info(templateSteps.recipe.wire, `recipe ${recipe}, storage ${storage}`);
    await step(installSteps.storage.wire, 'checking storage pool', () => proxmox.checkStorage({ diskGb: spec.diskGb, ...onStorage }));
    const cpuType = await step(installSteps.cpuBaseline.wire, 'detecting cluster CPU baseline', () => proxmox.clusterCpuType({ os: spec.os, version: spec.version }));
    const image = await step(installSteps.download.wire, `fetching ${spec.os} ${spec.version} cloud image`, () => transfer.downloadImage({ os: spec.os, version: spec.version }));
    const imagePath = await step(installSteps.stageImage.wire, 'placing the image on the main node', () =>
      transfer.stageImage({ path: image.path, sha: image.sha, os: spec.os, version: spec.version }),
    );
    const serviceKey = await step(installSteps.serviceKey.wire, 'reading the main node SSH key', () => proxmox.servicePublicKey());

    deprecatePatch(TEMPLATE_ADDRESS_LEASE);
    const vm = await step(installSteps.createVm.wire, 'creating the template VM', () =>
      makeWithFreeVmid<{ ip: string; node?: string }, PoolAddress | null>({
        namePrefix: spec.name,
        step: installSteps.createVm.wire,
        progress,
        owner,
        runId,
        compensations,
        prepare: (vmid: number) => leaseAddress(vmid),
        make: (vmid, name, lease) => proxmox.createVm({ vmid, name, spec, cpuType, owner, ...(lease ? { address: lease } : {}) }),
      }),
    );
    deprecatePatch(BUILD_HOLDS_ITS_VM);
    upsertSearchAttributes([{ key: VM_ID, value: vm.vmid }]);
    const lease = vm.prepared ?? undefined;
    if (lease) progress.info(installSteps.createVm.wire, `address ${lease.address} leased from address pool ${lease.pool}`);
    const ip = vm.made.ip;
    progress.vm = { vmid: vm.vmid, ip };
    progress.info(installSteps.createVm.wire, `VMID ${vm.vmid}, IP ${ip}, name ${vm.name}`);
    const volid = await step(installSteps.importDisk.wire, 'importing the cloud image as a disk', () => transfer.importDisk({ vmid: vm.vmid, imagePath, ...onStorage }));
    await step(installSteps.configure.wire, 'configuring cloud-init, disks and network', () =>
      proxmox.configureVm({ vmid: vm.vmid, volid, spec, ip, mainKey: serviceKey, ...(lease ? { ipconfig: lease.ipconfig } : {}) }),
    );
    // Where createVm made the VM: the activities ask it before the cluster's resources.
    const node = vm.made.node;
    await step(installSteps.start.wire, 'starting VM', () => proxmox.startVm({ vmid: vm.vmid, node }));
    const pinned = await step(installSteps.waitForSsh.wire, `waiting for SSH on ${ip}`, () => guest.waitForSsh({ ip, user: spec.user, vmid: vm.vmid, node }));
    const at = { ip, user: spec.user, os: spec.os, version: spec.version, vmid: vm.vmid, ...(pinned ? { hostKey: pinned.hostKey } : {}) };
    await step(installSteps.initScript.wire, `running the shared part of the ${spec.os} ${spec.version} init script`, async () => {
      await guest.waitForCloudInit({ ip, user: spec.user, vmid: vm.vmid, ...(pinned ? { hostKey: pinned.hostKey } : {}) });
      await guest.runInitScript({ ...at, phase: 'template' });
    });
    await step(templateSteps.clean.wire, 'removing what must differ between clones (cloud-init state, machine-id, host keys, logs)', () =>
      guest.runInitScript({ ...at, phase: 'seal' }),
    );
    await step(templateSteps.shutdown.wire, 'shutting the VM down', () => power.shutdownVm({ vmid: vm.vmid }));
    const builtAt = new Date().toISOString();
    await step(templateSteps.convert.wire, 'converting the VM to a template', () =>
      proxmox.convertToTemplate({ vmid: vm.vmid, owner, spec, marker: { os: spec.os, version: spec.version, storage, recipe, builtAt } }),
    );
    // From here on the template is what installs clone: a failure to retire is no reason to remove it.
    compensations.length = 0;
    // A template never runs: its address goes back to the pool (clones get their own).
    if (lease) await step(templateSteps.releaseAddress.wire, `releasing ${lease.address}`, () => releaseLease());
    const { retired, kept } = await step(templateSteps.retire.wire, 'retiring older templates of the same OS version', () =>
      cleanup.retireTemplates({ os: spec.os, version: spec.version, ...onStorage, keep: vm.vmid }),
    );
    if (retired.length > 0) progress.info(templateSteps.retire.wire, `removed ${retired.map((v) => `VM ${v}`).join(', ')}`);
    if (kept.length > 0) progress.info(templateSteps.retire.wire, `kept ${kept.map((v) => `VM ${v}`).join(', ')}: linked clones still use them; a later build retires them`);

    const elapsedSec = (Date.now() - started) / 1000;
    progress.emit(templateSteps.finished.wire, 'success', `[+] template ${vm.name} (VMID ${vm.vmid}) built in ${elapsedSec.toFixed(2)}s`);
    progress.state = 'completed';
    return { vmid: vm.vmid, name: vm.name, node: vm.made.node ?? '', storage, recipe, builtAt, elapsedSec, retired, kept };
  } catch (err) {
    await failWithCleanup(err, progress, compensations, 'template build cancelled');
    throw err;
  }

  /** The release is registered first, after the VM's removal: an allocation whose reply was lost still holds a lease. */
  async function leaseAddress(vmid: number): Promise<PoolAddress | null> {
    if (!compensations.includes(releaseLease)) compensations.push(releaseLease);
    return proxmox.leaseBuildAddress({ owner, vmid });
  }

  async function releaseLease(): Promise<void> {
    const released = await cleanup.releaseAddress({ owner });
    if (released.length > 0) progress.info(progress.current, `address ${released.join(', ')} released`);
  }
}
