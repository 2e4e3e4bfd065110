import {
  type BuildTemplateInput,
  type BuildTemplateResult,
  DEFAULT_USER,
  type InstallSpec,
  TEMPLATE_DISK_GB,
  type PoolAddress,
  TEMPLATE_TAG,
  templateNamePrefix,
  workflowInputs,
} from '../contract';
import { patched, workflowInfo } from '@temporalio/workflow';
import { Progress } from './progress';
import { checkedInput } from './checkInput';
import { cleanup, guest, power, proxmox, transfer } from './activityOptions';
import { makeWithFreeVmid } from './freeVmid';
import { failWithCleanup } from './compensations';

/**
 * The patch that leases the build's address from the first address pool when pools are
 * set, as an install naming no pool does, and gives it back once the VM is a template
 * (which never runs) or the build failed. Builds recorded before it replay as they ran.
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
  const target = checkedInput(workflowInputs.buildTemplate, input) as BuildTemplateInput;
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

  progress.emit('preparation > workflow', 'info', `[*] workflow id: ${owner}`);
  try {
    const { recipe, storage } = await step('preparation > recipe', 'reading what the template is built with', () => proxmox.templateRecipe(target));
    progress.info('preparation > recipe', `recipe ${recipe}, storage ${storage}`);
    await step('preparation > storage', 'checking storage pool', () => proxmox.checkStorage({ diskGb: spec.diskGb, ...onStorage }));
    const cpuType = await step('preparation > CPU baseline', 'detecting cluster CPU baseline', () => proxmox.clusterCpuType({ os: spec.os, version: spec.version }));
    const image = await step('OS preparation > download', `fetching ${spec.os} ${spec.version} cloud image`, () => transfer.downloadImage({ os: spec.os, version: spec.version }));
    const imagePath = await step('OS preparation > stage image', 'placing the image on the main node', () =>
      transfer.stageImage({ path: image.path, sha: image.sha, os: spec.os, version: spec.version }),
    );
    const serviceKey = await step('SSH preparation > main node key', 'reading the main node SSH key', () => proxmox.servicePublicKey());

    const leases = patched(TEMPLATE_ADDRESS_LEASE);
    const vm = await step('VM creation > qm create', 'creating the template VM', () =>
      makeWithFreeVmid<{ ip: string; node?: string }, PoolAddress | null>({
        namePrefix: spec.name,
        step: 'VM creation > qm create',
        progress,
        owner,
        runId,
        compensations,
        ...(leases ? { prepare: (vmid: number) => leaseAddress(vmid) } : {}),
        make: (vmid, name, lease) => proxmox.createVm({ vmid, name, spec, cpuType, owner, ...(lease ? { address: lease } : {}) }),
      }),
    );
    const lease = vm.prepared ?? undefined;
    if (lease) progress.info('VM creation > qm create', `address ${lease.address} leased from address pool ${lease.pool}`);
    const ip = vm.made.ip;
    progress.vm = { vmid: vm.vmid, ip };
    progress.info('VM creation > qm create', `VMID ${vm.vmid}, IP ${ip}, name ${vm.name}`);
    const volid = await step('VM creation > import disk', 'importing the cloud image as a disk', () => transfer.importDisk({ vmid: vm.vmid, imagePath, ...onStorage }));
    await step('VM initialization > cloud-init', 'configuring cloud-init, disks and network', () =>
      proxmox.configureVm({ vmid: vm.vmid, volid, spec, ip, mainKey: serviceKey, ...(lease ? { ipconfig: lease.ipconfig } : {}) }),
    );
    // Where createVm made the VM: the activities ask it before the cluster's resources.
    const node = vm.made.node;
    await step('VM initialization > start', 'starting VM', () => proxmox.startVm({ vmid: vm.vmid, node }));
    const pinned = await step('VM initialization > wait for SSH', `waiting for SSH on ${ip}`, () => guest.waitForSsh({ ip, user: spec.user, vmid: vm.vmid, node }));
    const at = { ip, user: spec.user, os: spec.os, version: spec.version, vmid: vm.vmid, ...(pinned ? { hostKey: pinned.hostKey } : {}) };
    await step('VM initialization > init script', `running the shared part of the ${spec.os} ${spec.version} init script`, async () => {
      await guest.waitForCloudInit({ ip, user: spec.user, vmid: vm.vmid, ...(pinned ? { hostKey: pinned.hostKey } : {}) });
      await guest.runInitScript({ ...at, phase: 'template' });
    });
    await step('template > clean for cloning', 'removing what must differ between clones (cloud-init state, machine-id, host keys, logs)', () =>
      guest.runInitScript({ ...at, phase: 'seal' }),
    );
    await step('template > shutdown', 'shutting the VM down', () => power.shutdownVm({ vmid: vm.vmid }));
    const builtAt = new Date().toISOString();
    await step('template > qm template', 'converting the VM to a template', () =>
      proxmox.convertToTemplate({ vmid: vm.vmid, owner, spec, marker: { os: spec.os, version: spec.version, storage, recipe, builtAt } }),
    );
    // From here on the template is what installs clone: a failure to retire is no reason to remove it.
    compensations.length = 0;
    // A template never runs: its address goes back to the pool (clones get their own).
    if (lease) await step('template > release address', `releasing ${lease.address}`, () => releaseLease());
    const { retired, kept } = await step('template > retire', 'retiring older templates of the same OS version', () =>
      cleanup.retireTemplates({ os: spec.os, version: spec.version, ...onStorage, keep: vm.vmid }),
    );
    if (retired.length > 0) progress.info('template > retire', `removed ${retired.map((v) => `VM ${v}`).join(', ')}`);
    if (kept.length > 0) progress.info('template > retire', `kept ${kept.map((v) => `VM ${v}`).join(', ')}: linked clones still use them; a later build retires them`);

    const elapsedSec = (Date.now() - started) / 1000;
    progress.emit('template > finished', 'success', `[+] template ${vm.name} (VMID ${vm.vmid}) built in ${elapsedSec.toFixed(2)}s`);
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
