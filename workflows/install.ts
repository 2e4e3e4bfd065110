import {
  failure,
  failureOf,
  type InstallInput,
  type InstallResult,
  type InstallSecrets,
  type InstallSpec,
  type PoolAddress,
  type QemuRunSinks,
  type RebootNeed,
  type TemplateChoice,
  vmSearchAttributes,
  workflowInputs,
  installSteps,
} from '../contract';
import { deprecatePatch, patched, upsertSearchAttributes, workflowInfo, proxySinks } from '@temporalio/workflow';
import { Progress } from './progress';
import { checkedWorkflowInput } from './checkInput';
import { cleanup, guest, proxmox, transfer } from './activityOptions';
import { makeWithFreeVmid } from './freeVmid';
import { failWithCleanup } from './compensations';

/**
 * Fewer Temporal actions for the same steps and events: the search attributes the run was
 * started with are not upserted again, waitForSsh brings a static install's address check
 * (no readGuestAddress of its own), and runInitScript waits for cloud-init itself (no
 * waitForCloudInit). A run that takes this path calls neither patch below: a worker from
 * before this one cannot replay it anyway (it does not know this marker), so their
 * markers would protect nothing. Runs recorded before take the other path.
 */
const FEWER_ACTIONS = 'install-fewer-actions';
/**
 * Deprecated: the preparation steps side by side. Runs recorded before it ran them in
 * turn; none of those can still be open (docs/versioning.md), so only its marker is kept,
 * for the runs recorded with it.
 */
const PREPARATION_SIDE_BY_SIDE = 'preparation-side-by-side';
/** Deprecated: a static install's address check beside the cloud-init wait (as above). */
const ADDRESS_CHECK_BESIDE_CLOUD_INIT = 'address-check-beside-cloud-init';

type Template = Extract<TemplateChoice, { vmid: number }>;

const { metrics } = proxySinks<QemuRunSinks>();

/** Creates a VM from an official cloud image and initialises it, step by step. */
export async function installVm(input: InstallInput): Promise<InstallResult> {
  // `mainNode` is in the inputs of earlier versions only: see createdOn below.
  const { spec, secrets, mainNode: recordedMainNode } = checkedWorkflowInput(workflowInputs.install, input) as InstallInput;
  const progress = new Progress();
  const started = Date.now();
  const { workflowId: owner, runId } = workflowInfo();
  const compensations: Array<() => Promise<void>> = [];

  const step = progress.step.bind(progress);
  const os = `${spec.os}-${spec.version}`;
  metrics.installStarted(os);

  progress.emit(installSteps.workflow.wire, 'info', `[*] workflow id: ${owner}`);
  const fewerActions = patched(FEWER_ACTIONS);
  const startAttributes = vmSearchAttributes('install', spec);
  if (!fewerActions || !startedWith(startAttributes)) upsertSearchAttributes(startAttributes);

  // The install's storage, named only when given: a spec without one asks what it asked before.
  const onStorage = spec.storage !== undefined ? { storage: spec.storage } : {};
  try {
    const checkStorage = () => step(installSteps.storage.wire, 'checking storage pool', () => proxmox.checkStorage({ diskGb: spec.diskGb, ...onStorage }));
    const detectCpuType = () => step(installSteps.cpuBaseline.wire, 'detecting cluster CPU baseline', () => proxmox.clusterCpuType({ os: spec.os, version: spec.version }));
    // The fast path: a clone of the current template skips the image and the slow part of the init script.
    const templateOrImage = async (): Promise<{ template?: Template; imagePath?: string }> => {
      const template = await progress.attributed(installSteps.template.wire, chooseTemplate);
      if (template) return { template };
      const image = await step(installSteps.download.wire, `fetching ${spec.os} ${spec.version} cloud image`, () =>
        transfer.downloadImage({ os: spec.os, version: spec.version }),
      );
      const imagePath = await step(installSteps.stageImage.wire, 'placing the image on the main node', () =>
        transfer.stageImage({ path: image.path, sha: image.sha, os: spec.os, version: spec.version }),
      );
      return { imagePath };
    };
    const readServiceKey = () =>
      step(installSteps.serviceKey.wire, 'reading the main node SSH key', () => proxmox.servicePublicKey());
    if (!fewerActions) deprecatePatch(PREPARATION_SIDE_BY_SIDE);
    // The image branch goes third: the only one whose activities stream output, it starts
    // its steps after the others have started theirs, so the output lands under its step.
    const [, cpuType, { template, imagePath }, serviceKey] = await progress.sideBySide([checkStorage, detectCpuType, templateOrImage, readServiceKey]);

    const creation = template ? installSteps.cloneVm.wire : installSteps.createVm.wire;
    const vm = await step(creation, template ? `cloning template ${template.name}` : 'creating VM', () => makeVm(creation, cpuType, template));
    if (vm.address) progress.info(creation, `address ${vm.ip} leased from address pool ${vm.address.pool}`);
    // Where the VM runs (after the migrate step, when the spec names another node): the
    // activities from the start on ask that node before the cluster's resources.
    const node = spec.node ?? vm.node;
    upsertSearchAttributes(vmSearchAttributes('install', spec, { vmid: vm.vmid, node }));
    const dhcp = vm.ip === 'dhcp';
    // A DHCP VM's address is known once its guest agent reports it, after start.
    if (!dhcp) progress.vm = { vmid: vm.vmid, ip: vm.ip };
    progress.info(creation, `VMID ${vm.vmid}, IP ${dhcp ? 'by DHCP' : vm.ip}, name ${vm.name}`);

    const volid =
      imagePath === undefined
        ? undefined
        : await step(installSteps.importDisk.wire, 'importing the cloud image as a disk', () => transfer.importDisk({ vmid: vm.vmid, imagePath, ...onStorage }));
    await step(installSteps.configure.wire, 'configuring cloud-init, disks and network', () =>
      proxmox.configureVm({
        vmid: vm.vmid,
        ...(volid !== undefined ? { volid } : {}),
        spec,
        ip: vm.ip,
        ...(vm.address ? { ipconfig: vm.address.ipconfig } : {}),
        mainKey: serviceKey,
        passwd: secrets.passwd,
        passwdHash: secrets.passwdHash,
        // Only when given: the input of an install without it stays what it was.
        ...(secrets.userData !== undefined ? { userData: secrets.userData } : {}),
      }),
    );
    if (node !== vm.node) {
      await step(installSteps.migrate.wire, `migrating to node ${node}`, () =>
        transfer.migrateVm({ vmid: vm.vmid, target: node, node: vm.node }),
      );
    }
    await step(installSteps.start.wire, 'starting VM', () => proxmox.startVm({ vmid: vm.vmid, node }));
    let ip = vm.ip;
    if (dhcp) {
      const read = await step(installSteps.guestAddress.wire, 'reading the address from the guest agent', () =>
        guest.readGuestAddress({ vmid: vm.vmid, wait: true, node }),
      );
      if (!read.ip) throw failure('GuestAddressError', `VM ${vm.vmid}'s guest agent reported no address: ${read.reason ?? 'no answer'}`);
      ip = read.ip;
      progress.vm = { vmid: vm.vmid, ip };
      progress.info(installSteps.guestAddress.wire, `address ${ip} (from the guest agent)`);
    }
    // A static install compares the agent's address with its own, once: in waitForSsh's
    // answer on the fewer-actions path, beside the cloud-init wait on the recorded one.
    const askAddress = !dhcp && fewerActions;
    const pinned = await step(installSteps.waitForSsh.wire, `waiting for SSH on ${ip}`, () =>
      // The account cloud-init made: with a custom user, the OS's own account exists only
      // once the init script has made it. The VMID lets the activity learn the guest's
      // host key from its agent; that key is pinned for every later connection.
      guest.waitForSsh({ ip, user: spec.user, vmid: vm.vmid, node, ...(askAddress ? { askAddress } : {}) }),
    );
    // Undefined in histories from before host keys were pinned.
    const hostKey = pinned?.hostKey;
    if (pinned) progress.info(installSteps.waitForSsh.wire, `host key ${pinned.fingerprint} (${pinned.source === 'guest agent' ? 'reported by the guest agent' : 'trusted on first use: the guest agent did not answer'})`);
    if (askAddress) reportAgentAddress(pinned?.address ?? { reason: 'no answer' }, ip);
    // One question, answered or not: a static install never fails because the agent is silent.
    const checkAddress = () =>
      progress.attributed(installSteps.waitForSsh.wire, async () => reportAgentAddress(await guest.readGuestAddress({ vmid: vm.vmid, node }), ip));
    if (!dhcp && !fewerActions) deprecatePatch(ADDRESS_CHECK_BESIDE_CLOUD_INIT);
    const runInitScript = (afterCloudInit: boolean) =>
      guest.runInitScript({
        ip,
        user: spec.user,
        os: spec.os,
        version: spec.version,
        rootPassword: secrets.rootPassword,
        vmid: vm.vmid,
        hostKey,
        // A clone runs the per-VM part only: the template ran the rest.
        ...(template ? { phase: 'clone' as const } : {}),
        ...(afterCloudInit ? { afterCloudInit } : {}),
      });
    const ran = await step(installSteps.initScript.wire, `running the ${spec.os} ${spec.version} init script`, async () => {
      if (fewerActions) return await runInitScript(true);
      const waitForCloudInit = () => guest.waitForCloudInit({ ip, user: spec.user, vmid: vm.vmid, hostKey });
      if (dhcp) await waitForCloudInit();
      else await progress.sideBySide([waitForCloudInit, checkAddress]);
      return await runInitScript(false);
    });
    // A clone's kernel and packages are the template's, already booted once: nothing asks for a reboot.
    if (!template && rebootAfterInitScript(ran?.reboot)) {
      await step(installSteps.reboot.wire, 'rebooting VM', () => proxmox.rebootVm({ vmid: vm.vmid, node }));
      await step(installSteps.waitForSsh.wire, `waiting for SSH on ${ip} after reboot`, () =>
        guest.waitForSsh({ ip, user: spec.user, vmid: vm.vmid, hostKey, node }),
      );
    }

    const elapsedSec = (Date.now() - started) / 1000;
    metrics.installFinished(os, 'completed', elapsedSec);
    progress.finished(installSteps.finalizing.wire, `VM installation completed in ${elapsedSec.toFixed(2)}s`, { ...vm, ip, user: spec.user });
    return { vmid: vm.vmid, ip, user: spec.user, node, name: vm.name, elapsedSec };
  } catch (err) {
    const { state, failedStep } = await failWithCleanup(err, progress, compensations, 'install cancelled');
    metrics.installFinished(os, state, (Date.now() - started) / 1000, failedStep);
    throw err;
  }

  /** What the guest agent says of a static install's address `ip`, under `wait for SSH`. */
  function reportAgentAddress(read: { ip?: string; reason?: string }, ip: string): void {
    progress.info(
      installSteps.waitForSsh.wire,
      read.ip === undefined ? `the guest agent reports no address (${read.reason ?? 'no answer'})` : read.ip === ip ? `the guest agent reports ${read.ip}, as configured` : `the guest agent reports ${read.ip}, not the configured ${ip}`,
    );
  }

  /**
   * Whether the image path reboots, said in an event either way: as asked (`always`), or as
   * the guest answered after its init script. A worker from before the question answers
   * nothing, and the install reboots as it always did.
   */
  function rebootAfterInitScript(need: RebootNeed | undefined): boolean {
    const at = installSteps.reboot.wire;
    if (spec.reboot === 'always') progress.info(at, 'rebooting, as asked (reboot "always")');
    else if (need === undefined) progress.info(at, 'rebooting: the worker did not ask the guest whether it must');
    else progress.info(at, need.required ? `rebooting: ${need.why}` : `no reboot needed: ${need.why}`);
    return spec.reboot === 'always' || need?.required !== false;
  }

  /**
   * The template an install clones, or none: the image when asked for, or when no current
   * template exists (the event says why). `source: "template"` without one fails: the caller
   * asked for the fast path and should know it did not run.
   */
  async function chooseTemplate(): Promise<Template | undefined> {
    const at = installSteps.template.wire;
    if (spec.source === 'image') {
      progress.info(at, 'building from the cloud image, as asked (source "image")');
      return undefined;
    }
    // No step of its own: an install of an OS version without templates shows the seed's events, one for one.
    progress.current = at;
    const found = await proxmox.findTemplate({ os: spec.os, version: spec.version, ...onStorage, diskGb: spec.diskGb });
    if (!('vmid' in found)) {
      if (spec.source === 'template') throw failure('TemplateNotFoundError', `source "template": ${found.reason} (build one with POST /api/templates)`);
      if (!found.none) progress.info(at, `building from the cloud image: ${found.reason}`);
      return undefined;
    }
    progress.info(at, `installing as a ${found.linked ? 'linked' : 'full'} clone of template ${found.name} (VMID ${found.vmid}, built ${found.builtAt})`);
    return found;
  }

  /** The VM under a free VMID: `qm create`, or `qm clone` of the template. */
  async function makeVm(creation: string, cpuType: string, template: Template | undefined): Promise<{ vmid: number; ip: string; name: string; node: string; address?: PoolAddress }> {
    const { vmid, name, made, prepared: address } = await makeWithFreeVmid({
      vmid: spec.vmid,
      namePrefix: spec.name,
      step: creation,
      progress,
      owner,
      runId,
      compensations,
      prepare: async (id) => (spec.addressPool === undefined ? undefined : await leaseAddress(spec.addressPool, id)),
      make: (id, vmName, lease) => {
        const create = { vmid: id, name: vmName, spec, cpuType, owner, ...(lease ? { address: lease } : {}) };
        if (template) return proxmox.cloneVm({ ...create, template: { vmid: template.vmid, node: template.node, storage: template.storage, linked: template.linked } });
        return proxmox.createVm(create);
      },
    });
    return { vmid, ip: made.ip, name, node: createdOn(made, recordedMainNode), ...(address ? { address } : {}) };
  }

  /**
   * The VM's address from its pool, leased to this install; asked again for the
   * next VMID when one was taken, the lease stays this install's and follows the VMID. Only
   * specs with a pool lease: an install recorded before pools schedules what it did. The
   * release is registered first: an allocation whose reply was lost still holds a lease.
   */
  async function leaseAddress(pool: string, vmid: number): Promise<PoolAddress> {
    if (!compensations.includes(releaseLease)) compensations.push(releaseLease);
    return proxmox.allocateAddress({ pool, owner, vmid, ...(spec.ip !== undefined ? { address: spec.ip } : {}) });
  }

  /** Runs after the VM's removal (compensations run in order, the VM's undo first). */
  async function releaseLease(): Promise<void> {
    const released = await cleanup.releaseAddress({ owner });
    if (released.length > 0) progress.info(progress.current, `address ${released.join(', ')} released`);
  }
}

/** Whether the run was started with these search attributes already (the API and a rebuild set them). */
function startedWith(pairs: ReturnType<typeof vmSearchAttributes>): boolean {
  const { typedSearchAttributes } = workflowInfo();
  return pairs.every(({ key, value }) => typedSearchAttributes.get(key) === value);
}

/**
 * The node createVm made the VM on: the worker's MAIN_NODE, the one source of it. An
 * install recorded before the activity said so carries the node its API sent in the input
 * instead, and replays with that.
 */
function createdOn(created: { node?: string }, recordedMainNode: string | undefined): string {
  const node = created.node ?? recordedMainNode;
  if (node === undefined) throw failure('ConfigError', 'createVm did not say which node it created the VM on');
  return node;
}

/** The message an operator needs: the activity's own error, not Temporal's wrapper. */
export function describeFailure(err: unknown): string {
  return failureOf(err).message;
}
