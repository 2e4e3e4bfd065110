import { deprecatePatch, isCancellation, workflowInfo } from '@temporalio/workflow';
import {
  adoptionOwner,
  failure,
  type GuestRef,
  type VmOperationResult,
  type VmRef,
  workflowInputs,
  operationStep,
  operationSteps,
  type StepDefinition,
} from '../contract';
import { cleanup, guest, power, proxmox, transfer } from './activityOptions';
import { Progress } from './progress';
import { describeFailure } from './install';
import { checkedWorkflowInput } from './checkInput';
import { requireIssued } from './issuedCommand';

/**
 * Short workflows for the operations on an existing VM. The API starts each one with the
 * workflow id `vm-<vmid>` and the conflict policy FAIL, so Temporal itself refuses a
 * second operation on a VM while one runs. Every one keeps its progress like an install
 * (same events, same re-attach), and its activities are safe to run twice.
 */

const GiB = 1024 ** 3;

/**
 * Deprecated: the patch that releases a destroyed VM's address lease (address pools).
 * Destroys recorded before it, which released nothing, can no longer be open; its marker
 * is kept for the runs recorded with it (docs/versioning.md).
 */
const RELEASE_ADDRESS_ON_DESTROY = 'release-address-on-destroy';

/** Starts a stopped VM and waits until its SSH answers. */
export async function vmStart(input: GuestRef): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.guestRef, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM start', input.vmid, async (step) => {
    await step(operationSteps.start, `starting VM ${input.vmid}`, () => proxmox.startVm({ vmid: input.vmid, ...instanceOf(input) }));
    const ip = await addressOf(step, input);
    await step(operationSteps.waitForSsh, `waiting for SSH on ${ip}`, () => guest.waitForSsh(pinnedWait(input, ip)));
    return { done: 'VM started successfully' };
  });
}

/** Reboots a running VM and waits until its SSH answers again. */
export async function vmReboot(input: GuestRef): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.guestRef, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM reboot', input.vmid, async (step) => {
    await step(operationSteps.reboot, `rebooting VM ${input.vmid}`, () => proxmox.rebootVm({ vmid: input.vmid, ...instanceOf(input) }));
    const ip = await addressOf(step, input);
    await step(operationSteps.waitForSsh, `waiting for SSH on ${ip}`, () => guest.waitForSsh(pinnedWait(input, ip)));
    return { done: 'VM rebooted successfully' };
  });
}

/**
 * The wait for the VM's own SSH: only the host key its guest agent reports through Proxmox
 * (the key the install pinned: the same guest made it on its first boot) is accepted, so
 * another machine answering at the address fails the operation (HostKeyMismatchError)
 * instead of passing for the VM.
 */
function pinnedWait(input: GuestRef, ip: string) {
  return { ip, user: input.user, vmid: input.vmid, pinnedOnly: true };
}

/**
 * The address to wait for SSH on: the one the API gave, or (a DHCP VM the API could not
 * ask, being stopped) the guest agent's once it answers. Runs recorded before DHCP always
 * carry an address, so they schedule nothing new.
 */
async function addressOf(step: Step, input: GuestRef): Promise<string> {
  if (input.ip !== undefined) return input.ip;
  const read = await step(operationSteps.guestAddress, `reading VM ${input.vmid}'s address from the guest agent`, () => guest.readGuestAddress({ vmid: input.vmid, wait: true }));
  if (!read.ip) throw failure('GuestAddressError', `VM ${input.vmid}'s guest agent reported no address: ${read.reason ?? 'no answer'}`);
  return read.ip;
}

/** ACPI shutdown: the guest powers off in its own time. */
export async function vmShutdown(input: VmRef): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.vmRef, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM shutdown', input.vmid, async (step) => {
    await step(operationSteps.shutdown, `shutting down VM ${input.vmid}`, () => power.shutdownVm({ vmid: input.vmid, ...instanceOf(input) }));
    return { done: 'VM shut down successfully' };
  });
}

/** Hard stop, like pulling the plug. */
export async function vmStop(input: VmRef): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.vmRef, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM stop', input.vmid, async (step) => {
    await step(operationSteps.stop, `stopping VM ${input.vmid}`, () => power.stopVm({ vmid: input.vmid, ...instanceOf(input) }));
    return { done: 'VM stopped successfully' };
  });
}

/** `qm destroy --purge` of a stopped VM. */
export async function vmDestroy(input: VmRef): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.vmRef, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM destroy', input.vmid, async (step) => {
    await step(operationSteps.destroy, `destroying VM ${input.vmid} and its disks`, () => proxmox.destroyVm({ vmid: input.vmid, ...instanceOf(input) }));
    deprecatePatch(RELEASE_ADDRESS_ON_DESTROY);
    // Not a step of its own: without pools there is nothing to say.
    const released = await cleanup.releaseAddress({ vmid: input.vmid });
    if (released.length > 0) return { done: `VM destroyed successfully, address ${released.join(', ')} released` };
    return { done: 'VM destroyed successfully' };
  });
}

export async function vmSetCpu(input: VmRef & { cores: number }): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.setCpu, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM CPU', input.vmid, async (step) => {
    await step(operationSteps.setCores, `setting ${input.cores} vCPU core(s)`, () => proxmox.setCpu({ vmid: input.vmid, cores: input.cores, ...instanceOf(input) }));
    return { done: `VM now has ${input.cores} vCPU core(s)` };
  });
}

export async function vmSetMemory(input: VmRef & { memoryMb: number }): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.setMemory, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM memory', input.vmid, async (step) => {
    await step(operationSteps.setMemory, `setting ${input.memoryMb} MB of memory`, () =>
      proxmox.setMemory({ vmid: input.vmid, memoryMb: input.memoryMb, ...instanceOf(input) }),
    );
    return { done: `VM now has ${input.memoryMb} MB of memory` };
  });
}

/**
 * Grows a disk by an increment. The current size is read first and the disk resized to
 * an absolute size, so a retried resize cannot grow it twice.
 */
export async function vmSetDisk(input: VmRef & { disk: string; incrementGb: number; maxDiskGb?: number }): Promise<VmOperationResult> {
  const { vmid, disk, incrementGb, maxDiskGb } = checkedWorkflowInput(workflowInputs.setDisk, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM disk', vmid, async (step) => {
    const current = await step(operationSteps.readSize, `reading the size of ${disk}`, () => proxmox.diskSize({ vmid, disk, ...instanceOf(input) }));
    const sizeBytes = current + incrementGb * GiB;
    if (maxDiskGb && sizeBytes > maxDiskGb * GiB) {
      throw failure(
        'InvalidRequestError',
        `${disk} would grow from ${gib(current)} to ${gib(sizeBytes)}, over VM_MAX_DISK (${maxDiskGb}G)`,
      );
    }
    await step(operationSteps.resize, `growing ${disk} by ${incrementGb}G, from ${gib(current)} to ${gib(sizeBytes)}`, () =>
      proxmox.growDisk({ vmid, disk, sizeBytes, ...instanceOf(input) }),
    );
    return { done: `${disk} is now ${gib(sizeBytes)}`, sizeBytes };
  });
}

/** Moves a stopped VM and its local disks to another node, streaming qm's output. */
export async function vmMigrate(input: VmRef & { from: string; target: string }): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.migrate, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM migration', input.vmid, async (step) => {
    await step(operationSteps.migrate, `migrating VM ${input.vmid} from ${input.from} to ${input.target}`, () =>
      transfer.migrateVm({ vmid: input.vmid, target: input.target, ...instanceOf(input) }),
    );
    return { done: `VM migrated to ${input.target} successfully`, node: input.target };
  });
}

/**
 * Takes a VM QemuRun did not install into the managed set, on purpose: its description gets
 * the owner marker and a dated note, and this run stays in history (with the client that
 * asked, `by`). From then on the VM's operations work as for an installed one.
 */
export async function vmAdopt(input: VmRef & { by?: string; tenant?: string }): Promise<VmOperationResult> {
  checkedWorkflowInput(workflowInputs.adopt, input);
  requireIssued(input, { instance: 'required' });
  return operation('VM adopt', input.vmid, async (step) => {
    const { workflowId, runId } = workflowInfo();
    const owner = adoptionOwner(input.vmid, runId);
    const at = new Date().toISOString();
    await step(operationSteps.adopt, `recording VM ${input.vmid} as managed by QemuRun`, () =>
      // The tenant only when given: the activity input of an adoption without one stays what it was.
      proxmox.adoptVm({ vmid: input.vmid, owner, at, workflowId, runId, by: input.by, ...(input.tenant !== undefined ? { tenant: input.tenant } : {}), ...instanceOf(input) }),
    );
    return { done: `VM adopted into the managed set (qemurun-owner=${owner})` };
  });
}

/**
 * The instance an activity must find at the VMID, as a field only when the input names one:
 * the activity inputs of runs recorded before stay as they were.
 */
function instanceOf(input: VmRef): { instance?: string } {
  return input.instance !== undefined ? { instance: input.instance } : {};
}

type Step = <T>(name: StepDefinition, doing: string, fn: () => Promise<T>) => Promise<T>;

/**
 * The frame every VM operation shares: the workflow id as the first event, the seed's
 * processing / success / error events per step, and a final `info` event.
 */
async function operation(
  stage: string,
  vmid: number,
  body: (step: Step) => Promise<{ done: string; node?: string; sizeBytes?: number }>,
): Promise<VmOperationResult> {
  const progress = new Progress();
  const started = Date.now();
  const { workflowId, workflowType } = workflowInfo();
  progress.emit(`${stage} > workflow`, 'info', `[*] workflow id: ${workflowId}`);

  const step: Step = (name, doing, fn) => progress.step(operationStep(stage, name), doing, fn);

  try {
    const { done, ...rest } = await body(step);
    const elapsedSec = (Date.now() - started) / 1000;
    progress.emit(`${stage} > finalizing`, 'info', `[+] ${done} (VM ${vmid}, ${elapsedSec.toFixed(2)}s)`);
    progress.state = 'completed';
    return { vmid, operation: workflowType, elapsedSec, ...rest };
  } catch (err) {
    const cancelled = isCancellation(err);
    progress.emit(progress.current || `${stage} > workflow`, 'error', `[-] ${cancelled ? 'operation cancelled' : describeFailure(err)}`);
    progress.state = cancelled ? 'cancelled' : 'failed';
    throw err;
  }
}

function gib(bytes: number): string {
  const g = bytes / GiB;
  return `${Number.isInteger(g) ? g : g.toFixed(2)}G`;
}
