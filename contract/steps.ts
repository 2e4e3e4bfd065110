import type { Activities } from './activities';

/**
 * Every step a workflow reports, in one table: the name its SSE events carry (`wire`),
 * what the step really runs, and the activities it schedules, as the Temporal UI names
 * them. The workflows take their step names from here, and so do the CLI's tests and
 * docs/how-an-install-runs.md (test/unit/steps.test.ts holds the docs to it), so a step
 * renamed here is renamed everywhere at once.
 *
 * The install's wire names are the seed's: its clients match on them, so they stay even
 * where they say less than the step does (`runs` says the rest).
 */
export interface StepDefinition {
  wire: string;
  runs: string;
  activities: ReadonlyArray<keyof Activities>;
}

const step = (wire: string, runs: string, activities: ReadonlyArray<keyof Activities> = []): StepDefinition => ({ wire, runs, activities });

/** An install's steps (installVm), in the order they run; a template build (buildTemplate) runs most of them too. */
export const installSteps = {
  workflow: step('preparation > workflow', 'an info event naming the workflow id'),
  storage: step('preparation > storage', 'checks the storage the disk goes to: it exists, holds disks, is active and has room', ['checkStorage']),
  cpuBaseline: step('preparation > CPU baseline', "finds the CPU type every node of the cluster can run", ['clusterCpuType']),
  template: step('preparation > template', "looks for the OS version's current golden template", ['findTemplate']),
  download: step('OS preparation > download', 'fetches the cloud image into the cache, checksum-verified', ['downloadImage']),
  stageImage: step('OS preparation > stage image', 'copies the image to a remote main node (nothing on it, or in API mode)', ['stageImage']),
  serviceKey: step(
    'SSH preparation > main node key',
    "reads the service's own public key (SSH_KEY_PATH), which every VM it builds trusts; the seed read the main node's",
    ['servicePublicKey'],
  ),
  createVm: step(
    'VM creation > qm create',
    'reserves a VMID (and a pool address) and creates the VM: `qm create`, or POST /nodes/{node}/qemu in API mode',
    ['allocateVmid', 'allocateAddress', 'createVm'],
  ),
  cloneVm: step('VM creation > qm clone', 'reserves a VMID (and a pool address) and clones the template', ['allocateVmid', 'allocateAddress', 'cloneVm']),
  importDisk: step('VM creation > import disk', 'imports the cloud image as the VM\'s disk', ['importDisk']),
  configure: step(
    'VM initialization > cloud-init',
    'configures the VM in one `qm set`: cloud-init, disks, boot order, network; then grows the boot disk',
    ['configureVm'],
  ),
  migrate: step('VM initialization > migrate', 'moves the VM to the node the request names', ['migrateVm']),
  start: step('VM initialization > start', 'starts the VM', ['startVm']),
  guestAddress: step('VM initialization > guest address', "reads a DHCP VM's address from its guest agent", ['readGuestAddress']),
  waitForSsh: step('VM initialization > wait for SSH', "waits for the guest's sshd, pins its host key and, with a static address, compares the guest agent's", ['waitForSsh']),
  initScript: step('VM initialization > init script', "waits for cloud-init, then runs the OS's init script, on one SSH connection", ['runInitScript']),
  reboot: step('VM initialization > reboot', 'reboots the VM when the guest says it must, then waits for SSH again', ['rebootVm', 'waitForSsh']),
  finalizing: step('VM initialization > finalizing', 'the final success event, with the VM'),
} as const;

/**
 * The install's steps that run side by side, as groups of branches: a branch's steps run
 * in turn, beside every other branch of its group, so their events interleave, each step
 * with its own start and end. The second group is that of the runs recorded before the
 * address check rode with the SSH wait: a static install's check, reported under `wait
 * for SSH`, ran beside the cloud-init wait of `init script`. The CLI and the console, which
 * import no service code, keep copies of it by wire name to read each event under its own
 * step (cli/render/model.ts, console/js/progress.js; test/unit/steps.test.ts holds them to it).
 */
export const sideBySideSteps: ReadonlyArray<ReadonlyArray<ReadonlyArray<StepDefinition>>> = [
  [[installSteps.storage], [installSteps.cpuBaseline], [installSteps.template, installSteps.download, installSteps.stageImage], [installSteps.serviceKey]],
  [[installSteps.waitForSsh], [installSteps.initScript]],
];

/** A template build's own steps (buildTemplate), besides the install's it shares. */
export const templateSteps = {
  recipe: step('preparation > recipe', 'reads the recipe and storage the template is built with', ['templateRecipe']),
  clean: step('template > clean for cloning', "runs the init script's seal phase: removes what must differ between clones (cloud-init state, machine-id, host keys, logs)", ['runInitScript']),
  shutdown: step('template > shutdown', 'shuts the VM down', ['shutdownVm']),
  convert: step('template > qm template', 'converts the VM to a template', ['convertToTemplate']),
  releaseAddress: step('template > release address', 'gives the build\'s pool address back: a template never runs', ['releaseAddress']),
  retire: step('template > retire', 'removes older templates of the same OS version no linked clone uses', ['retireTemplates']),
  finished: step('template > finished', 'the final success event'),
} as const;

/** A rebuild's steps (vmRebuild); its install's events are copied in under their own names. */
export const rebuildSteps = {
  workflow: step('VM rebuild > workflow', 'an info event naming the workflow id'),
  check: step('VM rebuild > check', 'reads the VM and the spec it was installed with', ['inspectRebuildTarget']),
  stop: step('VM rebuild > stop', 'stops the VM', ['stopOwnedVm']),
  destroy: step('VM rebuild > destroy', 'destroys the VM and its disks', ['destroyOwnedVm']),
  install: step('VM rebuild > install', 'installs it again under the same VMID, as a child installVm'),
  finalizing: step('VM rebuild > finalizing', 'the final success event, with the VM'),
} as const;

/**
 * The steps of the operations on a VM (workflows/lifecycle.ts), each under its
 * operation's name: `VM start > wait for SSH`.
 */
export const operationSteps = {
  start: step('start', 'starts the VM', ['startVm']),
  reboot: step('reboot', 'reboots the VM', ['rebootVm']),
  waitForSsh: step('wait for SSH', "waits for the guest's sshd", ['waitForSsh']),
  guestAddress: step('guest address', "reads the VM's address from its guest agent", ['readGuestAddress']),
  shutdown: step('shutdown', 'shuts the guest down through ACPI', ['shutdownVm']),
  stop: step('stop', 'stops the VM at once', ['stopVm']),
  destroy: step('destroy', 'destroys the VM and its disks', ['destroyVm']),
  setCores: step('set cores', 'sets the number of vCPU cores', ['setCpu']),
  setMemory: step('set memory', 'sets the memory', ['setMemory']),
  readSize: step('read size', "reads a disk's size", ['diskSize']),
  resize: step('resize', 'grows the disk', ['growDisk']),
  migrate: step('migrate', 'moves the VM to another node', ['migrateVm']),
  adopt: step('adopt', "seals QemuRun's markers into the VM's description", ['adoptVm']),
} as const;

/** The reconciler's steps (reconcileVms); each removal is a step of its own, `reconcile > remove <vmid>` (reconcileRemoveStep). */
export const reconcileSteps = {
  workflow: step('reconcile > workflow', 'an info event naming the workflow id, and whether it is a dry run'),
  survey: step('reconcile > survey', 'reads every VM, its owner marker and whether its owner run is still going', ['planReconcile']),
  remove: step('reconcile > remove', 'removes one VM an abandoned install left behind, after checking its marker again', ['destroyOwnedVm']),
  leases: step('reconcile > leases', 'reads the address leases, and releases by name those whose owner and VM are gone', ['planLeaseRelease', 'releaseLease']),
  finalizing: step('reconcile > finalizing', 'the final event: what was removed and released'),
} as const;

/** `reconcile > remove 123`: the removal of one VM, a step of its own. */
export function reconcileRemoveStep(vmid: number): string {
  return `${reconcileSteps.remove.wire} ${vmid}`;
}

/** `VM start > wait for SSH`: an operation's step as its events name it. */
export function operationStep(operation: string, name: StepDefinition): string {
  return `${operation} > ${name.wire}`;
}
