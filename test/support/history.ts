import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

const EventType = temporal.api.enums.v1.EventType;

/** The highest attempt of each activity type, from the workflow's real history. */
export async function activityAttempts(client: Client, workflowId: string): Promise<Record<string, number>> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const typeByScheduled = new Map<string, string>();
  const attempts: Record<string, number> = {};
  for (const e of history.events ?? []) {
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) {
      typeByScheduled.set(String(e.eventId), e.activityTaskScheduledEventAttributes!.activityType!.name!);
    }
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) {
      const a = e.activityTaskStartedEventAttributes!;
      const type = typeByScheduled.get(String(a.scheduledEventId))!;
      attempts[type] = Math.max(attempts[type] ?? 0, a.attempt ?? 1);
    }
  }
  return attempts;
}
