import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Config } from '../lib/config';
import { reconcileScheduleId, splitWorkflowType, withWorkflowType, type WorkflowType } from '../contract';
import { METADATA_WORKFLOW_ID_KEY } from '../lib/temporal/codec';

/**
 * The reconciler's schedule, made to match the settings at every start: created when
 * missing, its timing and action updated when they differ (a pause an operator set is
 * kept), deleted when RECONCILE_INTERVAL is off. Safe to run from several processes at
 * once: the loser of a create race updates instead.
 */
export async function ensureReconcileSchedule(client: Client, config: Config): Promise<'created' | 'updated' | 'unchanged' | 'deleted' | 'off'> {
  const scheduleId = reconcileScheduleId(config.temporal.taskQueue);
  const handle = client.schedule.getHandle(scheduleId);
  const everyMs = config.reconcileIntervalMs;
  if (everyMs === undefined) {
    try {
      await handle.delete();
      return 'deleted';
    } catch (err) {
      if (err instanceof ScheduleNotFoundError) return 'off';
      throw err;
    }
  }

  const wanted = {
    spec: { intervals: [{ every: everyMs }] },
    action: {
      type: 'startWorkflow' as const,
      workflowType: 'reconcileVms' satisfies WorkflowType,
      // Its input names its workflow type, which the workers require (contract/workflows.ts).
      args: withWorkflowType('reconcileVms' satisfies WorkflowType, [{}]),
      taskQueue: config.temporal.taskQueue,
      // Temporal appends the scheduled time to each run's id.
      workflowId: scheduleId,
      staticSummary: `remove VMs abandoned installs left behind (schedule ${scheduleId})`,
    },
    policies: {
      overlap: ScheduleOverlapPolicy.SKIP,
      // A run missed while the server was down is not worth making up: the next one comes.
      catchupWindow: '1m',
      pauseOnFailure: false,
    },
  } satisfies Omit<ScheduleOptions, 'scheduleId'>;

  try {
    await client.schedule.create({ scheduleId, ...wanted, memo: { qemurun: 'reconcile' } });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  const current = await handle.describe();
  const interval = current.spec.intervals?.[0];
  const same =
    current.spec.intervals?.length === 1 &&
    interval !== undefined &&
    Number(interval.every) === everyMs &&
    current.action.type === 'startWorkflow' &&
    current.action.workflowType === 'reconcileVms' &&
    current.action.taskQueue === config.temporal.taskQueue &&
    splitWorkflowType(current.action.args?.[0]).workflowType === 'reconcileVms' &&
    boundToWorkflow(current.raw);
  if (same) return 'unchanged';
  await handle.update((prev) => ({ ...prev, spec: wanted.spec, action: wanted.action, policies: { ...prev.policies, ...wanted.policies } }));
  return 'updated';
}

/**
 * Whether the stored action's input is bound to its workflow (lib/temporal/codec.ts). One
 * saved before binding is refused by the workers: saving the action again re-encodes it.
 */
function boundToWorkflow(raw: Awaited<ReturnType<ReturnType<Client['schedule']['getHandle']>['describe']>>['raw']): boolean {
  const payloads = raw.schedule?.action?.startWorkflow?.input?.payloads ?? [];
  return payloads.every((p) => p.metadata?.[METADATA_WORKFLOW_ID_KEY] !== undefined);
}
