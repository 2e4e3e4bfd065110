import { failure, failureOf, isFailureOf, vmName } from '../contract';
import { proxySinks } from '@temporalio/workflow';
import type { QemuRunSinks } from '../contract';
import { cleanup, proxmox } from './activityOptions';
import type { Progress } from './progress';

const MAX_VMID_ATTEMPTS = 20;

const { metrics } = proxySinks<QemuRunSinks>();

/**
 * Making the VM is the real VMID reservation: the cluster filesystem creates a config
 * atomically, whether `qm create` or `qm clone` writes it. Candidates come from one cluster
 * query; when another install (or a VM created by hand) wins the race, an auto-assigned VMID
 * is replaced by the next free one. Each attempt's removal is registered before it runs: a
 * create that times out may still have made the VM, and destroyOwnedVm only touches a VM
 * whose description carries this run's marker.
 */
export async function makeWithFreeVmid<T, P = undefined>(run: {
  vmid?: number;
  namePrefix?: string;
  /** The step the attempts are reported under (`VM creation > qm create`). */
  step: string;
  progress: Progress;
  owner: string;
  runId: string;
  /** Compensations of the workflow, run in order on failure: each attempt's undo goes first. */
  compensations: Array<() => Promise<void>>;
  /** What an attempt needs before it runs (an address lease), asked before its undo is registered. */
  prepare?: (vmid: number) => Promise<P>;
  make: (vmid: number, name: string, prepared: P) => Promise<T>;
}): Promise<{ vmid: number; name: string; made: T; prepared: P }> {
  const { progress, compensations, owner, runId } = run;
  const tried: number[] = [];
  for (let attempt = 0; attempt < MAX_VMID_ATTEMPTS; attempt++) {
    const vmid = run.vmid ?? (await proxmox.allocateVmid({ exclude: tried }));
    const name = vmName(run.namePrefix, vmid);
    const prepared = (run.prepare ? await run.prepare(vmid) : undefined) as P;
    const undo = async () => {
      progress.info(progress.current, `removing VM ${vmid}`);
      if (await cleanup.destroyOwnedVm({ vmid, owner, run: runId })) progress.info(progress.current, `VM ${vmid} removed`);
    };
    compensations.unshift(undo);
    try {
      return { vmid, name, made: await run.make(vmid, name, prepared), prepared };
    } catch (err) {
      // Any other failure may have left a VM behind, so its undo stays registered.
      if (!isFailureOf(failureOf(err).type, 'VmidTakenError')) throw err;
      compensations.splice(compensations.indexOf(undo), 1); // the ID belongs to someone else
      if (run.vmid !== undefined) throw err;
      progress.info(run.step, `VMID ${vmid} was taken meanwhile, picking another`);
      metrics.vmidTaken();
      tried.push(vmid);
    }
  }
  throw failure('NoFreeVmidError', `no free VMID after ${MAX_VMID_ATTEMPTS} attempts`);
}
