import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

const EventType = temporal.api.enums.v1.EventType;

type Timestamp = { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined;

const ms = (t: Timestamp) => (t ? Number(typeof t.seconds === 'object' && t.seconds ? t.seconds.toNumber() : (t.seconds ?? 0)) * 1000 + (t.nanos ?? 0) / 1e6 : 0);

export interface ActivitySpan {
  name: string;
  /** When the workflow task that scheduled it completed (epoch ms). */
  scheduled: number;
  start: number;
  end: number;
}

/** Each activity attempt that ended: its type, and when it was scheduled, started and ended. */
export async function activitySpans(client: Client, workflowId: string): Promise<ActivitySpan[]> {
  return spansOf(await client.workflow.getHandle(workflowId).fetchHistory());
}

export function spansOf(history: temporal.api.history.v1.IHistory): ActivitySpan[] {
  const type = new Map<string, string>();
  const scheduled = new Map<string, number>();
  const started = new Map<string, number>();
  const out: ActivitySpan[] = [];
  for (const e of history.events ?? []) {
    const id = String(e.eventId);
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) {
      type.set(id, e.activityTaskScheduledEventAttributes!.activityType!.name!);
      scheduled.set(id, ms(e.eventTime));
    } else if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) started.set(String(e.activityTaskStartedEventAttributes!.scheduledEventId), ms(e.eventTime));
    else {
      const closed =
        e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes ?? e.activityTaskCanceledEventAttributes;
      if (!closed?.scheduledEventId) continue;
      const sid = String(closed.scheduledEventId);
      const name = type.get(sid);
      const start = started.get(sid);
      if (name && start !== undefined) out.push({ name, scheduled: scheduled.get(sid) ?? start, start, end: ms(e.eventTime) });
    }
  }
  return out;
}

/** Milliseconds each activity type ran (from its start to its completion or failure), summed. */
export async function activityTime(client: Client, workflowId: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const { name, start, end } of await activitySpans(client, workflowId)) out.set(name, (out.get(name) ?? 0) + end - start);
  return out;
}

/** Seconds the attempts of one activity type ran, or only its `nth` attempt (0-based). */
export function activitySeconds(spans: ActivitySpan[], name: string, nth?: number): number {
  const of = spans.filter((sp) => sp.name === name);
  return (nth === undefined ? of : of.slice(nth, nth + 1)).reduce((sum, sp) => sum + sp.end - sp.start, 0) / 1000;
}

/**
 * History event types that Temporal Cloud bills as actions (docs.temporal.io/cloud/actions):
 * the start, each activity attempt, signals, timers, markers (patches, side effects, local
 * activities) and search-attribute upserts. Heartbeats and queries are billed too but leave
 * no event, so a count from the history is a floor.
 */
const BILLABLE: ReadonlyMap<number, string> = new Map([
  [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 'start'],
  [EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, 'activity'],
  [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 'signal'],
  [EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, 'signal'],
  [EventType.EVENT_TYPE_TIMER_STARTED, 'timer'],
  [EventType.EVENT_TYPE_MARKER_RECORDED, 'marker'],
  [EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 'upsert'],
  [EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, 'child'],
  [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, 'update'],
]);

/** The billable events of a history, in all and by kind; an activity counts once per attempt. */
export function billableEvents(history: temporal.api.history.v1.IHistory): { total: number; byKind: Record<string, number> } {
  const byKind: Record<string, number> = {};
  for (const e of history.events ?? []) {
    const kind = BILLABLE.get(e.eventType ?? 0);
    if (kind === undefined) continue;
    const n = kind === 'activity' ? Math.max(1, e.activityTaskStartedEventAttributes?.attempt ?? 1) : 1;
    byKind[kind] = (byKind[kind] ?? 0) + n;
  }
  return { total: Object.values(byKind).reduce((a, b) => a + b, 0), byKind };
}

/** `27 (18 activity, 4 upsert, 2 marker, 2 signal, 1 start)`: the largest kinds first. */
export function billableSummary(b: ReturnType<typeof billableEvents>): string {
  const kinds = Object.entries(b.byKind).sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]));
  return `${b.total} (${kinds.map(([k, n]) => `${n} ${k}`).join(', ')})`;
}
