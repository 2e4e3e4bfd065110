import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

const EventType = temporal.api.enums.v1.EventType;

type Timestamp = { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined;

const ms = (t: Timestamp) => (t ? Number(typeof t.seconds === 'object' && t.seconds ? t.seconds.toNumber() : (t.seconds ?? 0)) * 1000 + (t.nanos ?? 0) / 1e6 : 0);

/** Milliseconds each activity type ran (from its start to its completion or failure), summed. */
export async function activityTime(client: Client, workflowId: string): Promise<Map<string, number>> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const type = new Map<string, string>();
  const started = new Map<string, number>();
  const out = new Map<string, number>();
  for (const e of history.events ?? []) {
    const id = String(e.eventId);
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) type.set(id, e.activityTaskScheduledEventAttributes!.activityType!.name!);
    else if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) started.set(String(e.activityTaskStartedEventAttributes!.scheduledEventId), ms(e.eventTime));
    else {
      const closed =
        e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes ?? e.activityTaskCanceledEventAttributes;
      if (!closed?.scheduledEventId) continue;
      const sid = String(closed.scheduledEventId);
      const name = type.get(sid);
      const t0 = started.get(sid);
      if (name && t0 !== undefined) out.set(name, (out.get(name) ?? 0) + ms(e.eventTime) - t0);
    }
  }
  return out;
}
