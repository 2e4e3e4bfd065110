import {
  ApplicationFailure,
  isCancellation,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  type RebuildInput,
  type ScheduledRebuildResult,
  VM_ID,
  VM_OPERATION,
  vmWorkflowId,
  workflowInputs,
  type FailureType,
  failureOf,
  isFailureOf,
  WorkflowExecutionAlreadyStartedError,
} from '../contract';
import { Progress } from './progress';
import { checkedWorkflowInput } from './checkInput';
import { vmRebuild } from './rebuild';
import { quick } from './activityOptions';

/**
 * What a rebuild schedule starts (Temporal appends the scheduled time to its id). It runs
 * `vmRebuild` as a child under the VM's own id `vm-<vmid>`: when any operation on that VM
 * is running (a rebuild, a start, a migration, ...), the child cannot start, and this run
 * completes as "skipped", saying what held the VM. A rebuild that fails fails this run,
 * which pauses the schedule (pauseOnFailure) until an operator looks.
 */
export async function scheduledRebuild(input: RebuildInput): Promise<ScheduledRebuildResult> {
  checkedWorkflowInput(workflowInputs.rebuild, input);
  const { vmid } = input;
  const progress = new Progress();
  const rebuildId = vmWorkflowId(vmid);
  const stage = 'schedule > rebuild';
  progress.current = stage;
  progress.emit('schedule > run', 'info', `[*] workflow id: ${workflowInfo().workflowId}`);
  upsertSearchAttributes([
    { key: VM_OPERATION, value: 'rebuild' },
    { key: VM_ID, value: vmid },
  ]);

  let child;
  try {
    child = await startChild(vmRebuild, {
      workflowId: rebuildId,
      args: [input],
      parentClosePolicy: 'REQUEST_CANCEL',
      typedSearchAttributes: [
        { key: VM_OPERATION, value: 'rebuild' },
        { key: VM_ID, value: vmid },
      ],
      staticSummary: `scheduled rebuild of VM ${vmid} (run ${workflowInfo().workflowId})`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const running = await quick.runningVmOperation({ vmid });
    const reason = running
      ? `VM ${vmid} is busy: ${running.type} (workflow ${running.workflowId}, started ${running.startTime}) is running`
      : `VM ${vmid} was busy with another operation (workflow ${rebuildId})`;
    progress.emit(stage, 'info', `[*] skipped: ${reason}`);
    progress.state = 'completed';
    return { outcome: 'skipped', vmid, reason, runningWorkflowId: running?.workflowId, runningType: running?.type };
  }

  progress.info(stage, `rebuild workflow ${rebuildId} started (run ${child.firstExecutionRunId})`);
  try {
    const rebuild = await child.result();
    progress.emit(stage, 'success', `[+] VM ${vmid} rebuilt in ${rebuild.elapsedSec.toFixed(2)}s`);
    progress.state = 'completed';
    return { outcome: 'rebuilt', vmid, rebuildWorkflowId: rebuildId, rebuild };
  } catch (err) {
    // The rebuild's own verdict, inside the ChildWorkflowFailure: its type and what became of the VM ("nothing was destroyed", ...).
    const verdict = failureOf(err);
    if (isFailureOf(verdict.type, 'VmBusyError')) {
      // Its install is still running: not a failure of the schedule, so no pause.
      progress.emit(stage, 'info', `[*] skipped: ${verdict.message}`);
      progress.state = 'completed';
      return { outcome: 'skipped', vmid, reason: verdict.message };
    }
    const { type, message } = verdict;
    progress.emit(stage, 'error', `[-] rebuild of VM ${vmid} failed: ${message}`);
    progress.state = isCancellation(err) ? 'cancelled' : 'failed';
    if (isCancellation(err)) throw err;
    throw ApplicationFailure.create({ message: `rebuild of VM ${vmid} failed: ${message}`, type: type ?? ('RebuildError' satisfies FailureType), nonRetryable: true, cause: err as Error });
  }
}
