import { deprecatePatch, isCancellation, log, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { reconcileRemoveStep, reconcileSteps, VM_OPERATION, type LeaseItem, type ReconcileInput, type ReconcileItem, type ReconcileResult } from '../contract';
import { cleanup, survey } from './activityOptions';
import { describeFailure } from './install';
import { Progress } from './progress';

/**
 * Deprecated: the patch that releases the address leases of owners and VMs that are gone.
 * Runs from before it, which left leases alone, can no longer be open; its marker is kept
 * for the runs recorded with it (docs/versioning.md).
 */
const RELEASE_STALE_LEASES = 'release-stale-leases';

/**
 * Removes what abandoned installs left behind. `temporal workflow terminate` (or a worker
 * lost for good) skips an install's compensation, leaving a half-built VM that carries the
 * install's owner marker. This run surveys every VM, decides with the rule in contract/reconcile.ts
 * (owner closed without finishing, or unknown to the namespace), and removes those through
 * destroyOwnedVm, which checks the marker again at the last moment. A dry run stops after
 * the survey. Then the address leases: one whose owner no longer runs and whose VM is gone
 * (a terminated install, a VM destroyed outside QemuRun) is released, by name, so a lease
 * made meanwhile stays. Run by the reconcile schedule and by POST /api/reconcile.
 */
export async function reconcileVms(input: ReconcileInput = {}): Promise<ReconcileResult> {
  const dryRun = input.dryRun === true;
  const progress = new Progress();
  progress.emit(reconcileSteps.workflow.wire, 'info', `[*] workflow id: ${workflowInfo().workflowId}${dryRun ? ' (dry run)' : ''}`);
  upsertSearchAttributes([{ key: VM_OPERATION, value: 'reconcile' }]);

  try {
    const plan = await progress.step(reconcileSteps.survey.wire, 'reading every VM, its owner marker and its owner', () => survey.planReconcile());
    const doomed = plan.filter((v) => v.action === 'remove');
    progress.info(reconcileSteps.survey.wire, `${plan.length} VM(s), ${doomed.length} left behind by abandoned installs`);
    if (dryRun) {
      for (const v of doomed) progress.info(reconcileSteps.survey.wire, `would remove VM ${v.vmid}: ${v.reason}`);
      deprecatePatch(RELEASE_STALE_LEASES);
      const leases = await planLeases();
      for (const l of leases.filter((l) => l.action === 'release')) progress.info(reconcileSteps.leases.wire, `would release ${l.address} (pool ${l.pool}): ${l.reason}`);
      progress.emit(reconcileSteps.finalizing.wire, 'info', '[+] dry run: nothing was changed');
      progress.state = 'completed';
      return { dryRun, vms: plan, removed: [], failed: [], leases, released: [] };
    }

    const vms: ReconcileItem[] = [];
    for (const item of plan) {
      if (item.action !== 'remove' || item.owner === undefined) {
        vms.push(item);
        continue;
      }
      vms.push(await removeVm(item, item.owner));
    }
    const removed = vms.filter((v) => v.action === 'removed').map((v) => v.vmid);
    const failed = vms.filter((v) => v.action === 'failed').map((v) => v.vmid);
    // After the removals: a lease of a VM removed just now is released in this run.
    deprecatePatch(RELEASE_STALE_LEASES);
    const leases = await releaseLeases(await planLeases());
    const released = leases.filter((l) => l.action === 'released').map((l) => l.address);
    progress.emit(
      reconcileSteps.finalizing.wire,
      'info',
      `[+] removed ${removed.length} VM(s)${failed.length ? `, ${failed.length} could not be removed` : ''}, released ${released.length} address lease(s)`,
    );
    progress.state = 'completed';
    return { dryRun, vms, removed, failed, leases, released };
  } catch (err) {
    progress.emit(progress.current || reconcileSteps.workflow.wire, 'error', `[-] ${describeFailure(err)}`);
    progress.state = isCancellation(err) ? 'cancelled' : 'failed';
    throw err;
  }

  async function planLeases(): Promise<LeaseItem[]> {
    const leases = await progress.step(reconcileSteps.leases.wire, 'reading the address leases, their owners and their VMs', () => survey.planLeaseRelease());
    progress.info(reconcileSteps.leases.wire, `${leases.length} lease(s), ${leases.filter((l) => l.action === 'release').length} of owners and VMs that are gone`);
    return leases;
  }

  /** Each by name (address and generation): an address leased anew since the survey stays leased. */
  async function releaseLeases(leases: LeaseItem[]): Promise<LeaseItem[]> {
    const out: LeaseItem[] = [];
    for (const l of leases) {
      if (l.action !== 'release') {
        out.push(l);
        continue;
      }
      try {
        const released = await cleanup.releaseLease({ pool: l.pool, address: l.address, generation: l.generation });
        if (released.length > 0) progress.info(reconcileSteps.leases.wire, `released ${l.address} (pool ${l.pool}): ${l.reason}`);
        out.push(released.length > 0 ? { ...l, action: 'released' } : { ...l, action: 'gone', reason: `${l.reason}; by now the address holds another lease or none` });
      } catch (err) {
        if (isCancellation(err)) throw err;
        out.push({ ...l, action: 'failed', reason: `${l.reason}; releasing it failed: ${describeFailure(err)}` });
      }
    }
    return out;
  }

  /** destroyOwnedVm checks the marker again: a VM re-owned since the survey is left alone. */
  async function removeVm(item: ReconcileItem, owner: string): Promise<ReconcileItem> {
    const step = reconcileRemoveStep(item.vmid);
    try {
      const removed = await progress.step(step, `removing VM ${item.vmid}: ${item.reason}`, () => cleanup.destroyOwnedVm({ vmid: item.vmid, owner }));
      return removed ? { ...item, action: 'removed' } : { ...item, action: 'gone', reason: `${item.reason}; by now it is gone or carries another owner` };
    } catch (err) {
      if (isCancellation(err)) throw err;
      log.error('reconciler could not remove a VM', { vmid: item.vmid, error: describeFailure(err) });
      progress.emit(step, 'processing', `[-] VM ${item.vmid} could not be removed: ${describeFailure(err)}`);
      return { ...item, action: 'failed', reason: `${item.reason}; removing it failed: ${describeFailure(err)}` };
    }
  }
}
