import type { ScheduleDescription } from '@temporalio/client';
import { timingOf } from './request';
import { rebuildInputOf, type ListedRebuild } from './service';

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

/** One line of the schedule list: what the server lists, without decoding the action. */
export function presentListed({ entry, vmid }: ListedRebuild) {
  const info = entry.info ?? {};
  const last = info.recentActions?.at(-1);
  const spec = info.spec;
  return {
    id: entry.scheduleId ?? '',
    vmid,
    ...(spec
      ? timingOf({
          timezone: spec.timezoneName ?? undefined,
          calendars: spec.structuredCalendar?.map((c) => ({ ...c, comment: c.comment ?? undefined })),
          intervals: spec.interval?.map((i) => ({ every: msOf(i.interval) })),
        })
      : {}),
    paused: info.paused === true,
    note: info.notes || null,
    nextRun: info.futureActionTimes?.[0] ? dateOf(info.futureActionTimes[0]).toISOString() : null,
    lastRun: last ? { scheduledAt: dateOf(last.scheduleTime).toISOString(), workflowId: last.startWorkflowResult?.workflowId ?? '' } : null,
  };
}

/** A protobuf Timestamp or Duration (seconds may be a Long). */
type ProtoTime = { seconds?: unknown; nanos?: number | null } | null | undefined;

const msOf = (t: ProtoTime): number => Number(t?.seconds ?? 0) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);
const dateOf = (t: ProtoTime): Date => new Date(msOf(t));
