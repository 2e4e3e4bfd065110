import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Config } from '../lib/config';
import { type BuildTemplateInput, TEMPLATE_WORKFLOW_PREFIX, templateScheduleId, withWorkflowType, type WorkflowType } from '../contract';
import { listScheduleEntries, memoFieldOf } from '../lib/temporal/scheduleListing';

/**
 * One Temporal Schedule per template target (TEMPLATES), refreshing its template on
 * TEMPLATE_SCHEDULE: made to match the settings at every start, as the reconciler's is.
 * Created when missing, updated when its timing or action differ (a pause an operator set
 * is kept), and a template schedule whose target left TEMPLATES is deleted. Safe to run from
 * several processes at once: the loser of a create race updates instead.
 */
export async function ensureTemplateSchedules(client: Client, config: Config): Promise<Record<string, 'created' | 'updated' | 'deleted'>> {
  const outcome: Record<string, 'created' | 'updated' | 'deleted'> = {};
  const wantedIds = new Set<string>();
  for (const target of config.templates.targets) {
    const scheduleId = templateScheduleId(target);
    wantedIds.add(scheduleId);
    outcome[scheduleId] = await ensureOne(client, config, scheduleId, target);
  }
  for await (const entry of listScheduleEntries(client, config.temporal.namespace)) {
    const scheduleId = entry.scheduleId ?? '';
    if (!scheduleId.startsWith(TEMPLATE_WORKFLOW_PREFIX) || wantedIds.has(scheduleId)) continue;
    // Only schedules this setting made: one an operator made by hand under such an id stays.
    if ((await memoFieldOf(client, entry, 'qemurun')) !== 'template') continue;
    try {
      await client.schedule.getHandle(scheduleId).delete();
      outcome[scheduleId] = 'deleted';
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }
  return outcome;
}

async function ensureOne(client: Client, config: Config, scheduleId: string, target: BuildTemplateInput): Promise<'created' | 'updated'> {
  const cron = config.templates.schedule;
  const wanted = {
    spec: { cronExpressions: [cron] },
    action: {
      type: 'startWorkflow' as const,
      workflowType: 'buildTemplate' satisfies WorkflowType,
      // Its input names its workflow type, which the workers require (contract/workflows.ts).
      args: withWorkflowType('buildTemplate' satisfies WorkflowType, [target]),
      taskQueue: config.temporal.taskQueue,
      // Temporal appends the scheduled time to each run's id.
      workflowId: scheduleId,
      staticSummary: `refresh the ${target.os} ${target.version} template (schedule ${scheduleId})`,
    },
    policies: {
      // A build that still runs (a slow mirror) is not doubled; the next night comes.
      overlap: ScheduleOverlapPolicy.SKIP,
      catchupWindow: '1h',
      pauseOnFailure: false,
    },
  } satisfies Omit<ScheduleOptions, 'scheduleId'>;

  try {
    await client.schedule.create({ scheduleId, ...wanted, memo: { qemurun: 'template' } });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  // Temporal keeps a cron expression as calendars, which do not compare with the setting:
  // the schedule is saved again at every start (an operator's pause is kept).
  await client.schedule.getHandle(scheduleId).update((prev) => ({ ...prev, spec: wanted.spec, action: wanted.action, policies: { ...prev.policies, ...wanted.policies } }));
  return 'updated';
}

