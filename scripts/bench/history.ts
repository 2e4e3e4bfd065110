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
