import type { ScheduleDescription, ScheduleSummary } from '@temporalio/client';
import { timingOf } from './request';
import { rebuildInputOf } from './service';

/**
 * A schedule as the API shows it. The action's arguments are decoded through the codec,
 * so the password is dropped here: it is never shown, only whether one is set.
 */
export function presentSchedule(desc: ScheduleDescription) {
  const input = rebuildInputOf(desc);
  return {
    id: desc.scheduleId,
    vmid: input.vmid,
    source: input.spec ? 'spec' : 'recorded',
    ...(input.spec ? { spec: input.spec } : {}),
    passwd: input.passwd !== undefined ? 'set' : 'default',
    ...timingOf(desc.spec),
    overlap: desc.policies.overlap,
    pauseOnFailure: desc.policies.pauseOnFailure,
    paused: desc.state.paused,
    note: desc.state.note ?? null,
    createdAt: desc.info.createdAt.toISOString(),
    updatedAt: desc.info.lastUpdatedAt?.toISOString() ?? null,
    nextRuns: desc.info.nextActionTimes.map((d) => d.toISOString()),
    actionsTaken: desc.info.numActionsTaken,
    skippedOverlap: desc.info.numActionsSkippedOverlap,
    missedCatchupWindow: desc.info.numActionsMissedCatchupWindow,
    running: desc.info.runningActions.map((a) => a.workflow.workflowId),
    workflowQuery: `TemporalScheduledById = '${desc.scheduleId}'`,
  };
}

/** The recent runs of a schedule, each with what it did (`outcomeOf` asks Temporal). */
export async function presentRecentRuns(desc: ScheduleDescription, outcomeOf: (workflowId: string, runId: string) => Promise<Record<string, unknown>>) {
  return Promise.all(
    desc.info.recentActions.map(async (a) => ({
      scheduledAt: a.scheduledAt.toISOString(),
      startedAt: a.takenAt.toISOString(),
      workflowId: a.action.workflow.workflowId,
      runId: a.action.workflow.firstExecutionRunId,
      ...(await outcomeOf(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId)),
    })),
  );
}

/** One line of the schedule list: what the list call returns, without decoding the action. */
export function presentListed(s: ScheduleSummary) {
  const last = s.info.recentActions.at(-1);
  const vmid = s.memo?.vmid;
  return {
    id: s.scheduleId,
    vmid: typeof vmid === 'number' ? vmid : null,
    ...(s.spec ? timingOf(s.spec) : {}),
    paused: s.state.paused,
    note: s.state.note ?? null,
    nextRun: s.info.nextActionTimes[0]?.toISOString() ?? null,
    lastRun: last ? { scheduledAt: last.scheduledAt.toISOString(), workflowId: last.action.workflow.workflowId } : null,
  };
}
