import { ScheduleNotFoundError, ServiceError, type Client, type ScheduleDescription } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/observability/log';
import { reason } from '../lib/startupError';
import { METADATA_WORKFLOW_ID_KEY } from '../lib/temporal/codec';
import { listScheduleEntries } from '../lib/temporal/scheduleListing';
import { checkInput, REBUILD_SCHEDULE_PREFIX, splitWorkflowType, withWorkflowType, workflowInputs, type WorkflowType } from '../contract';

const REBUILD: WorkflowType = 'scheduledRebuild';

/** A schedule's input to save with its type, why it is left as it is, or that it names its type already. */
type Verdict = { input: unknown } | { leave: string } | { fine: true };

/** Thrown from the update callback when the schedule changed since it was read. */
class ChangedMeanwhile extends Error {}

/**
 * Rebuild schedules saved before inputs named their workflow type (contract/workflows.ts,
 * WORKFLOW_TYPE_FIELD) fail every run: the workers refuse their input. At start, each of this
 * service's rebuild schedules (default id `rebuild-vm-<vmid>`, this task queue) whose action
 * starts `scheduledRebuild` and whose input lacks the type is saved again with it, as
 * `PATCH /api/schedules/<id>` with `{}` would.
 *
 * Only an input this service wrote is given a type: one the codec decodes and binds to the
 * schedule's own id (the action's workflow id, which nothing but a rebuild schedule uses)
 * and that is a rebuild input. Stamping a type on anything else would undo what the type is
 * for (an input written for one workflow run as another), so those are named in the log and
 * left alone. Idempotent: a schedule that names its type is not touched again.
 */
export async function bindRebuildScheduleTypes(client: Client, config: Config, logger: Logger): Promise<{ saved: string[]; left: string[] }> {
  const saved: string[] = [];
  const left: string[] = [];
  const ids: string[] = [];
  for await (const s of listScheduleEntries(client, config.temporal.namespace)) {
    const id = s.scheduleId ?? '';
    if (!id.startsWith(REBUILD_SCHEDULE_PREFIX)) continue;
    const type = s.info?.workflowType?.name;
    if (type === REBUILD) {
      ids.push(id);
    } else {
      // Listings name no task queue: this may be another deployment's, so it is only named.
      logger.warn(`schedule ${id} does not start ${REBUILD} (${type ?? 'no workflow'}): left as it is`);
      left.push(id);
    }
  }
  for (const id of ids) {
    const handle = client.schedule.getHandle(id);
    let desc: ScheduleDescription;
    try {
      desc = await handle.describe();
    } catch (err) {
      if (err instanceof ScheduleNotFoundError) continue;
      if (err instanceof ServiceError) throw err;
      logger.warn(`rebuild schedule ${id}: its input cannot be read (${reason(err).split('\n')[0]}): left as it is`);
      left.push(id);
      continue;
    }
    if (desc.action.type !== 'startWorkflow' || desc.action.taskQueue !== config.temporal.taskQueue) continue;
    const verdict = judge(desc);
    if ('fine' in verdict) continue;
    if ('leave' in verdict) {
      logger.warn(`rebuild schedule ${id}: ${verdict.leave}: left as it is`);
      left.push(id);
      continue;
    }
    try {
      await handle.update((prev) => {
        // Read again inside the update: it was changed in between only if someone saved it.
        const now = judge(prev);
        if (!('input' in now)) throw new ChangedMeanwhile();
        return { ...prev, action: { ...prev.action, args: withWorkflowType(REBUILD, [now.input]) } };
      });
    } catch (err) {
      if (err instanceof ChangedMeanwhile || err instanceof ScheduleNotFoundError) continue;
      throw err;
    }
    logger.info(`rebuild schedule ${id}: saved again with its workflow type in its input`);
    saved.push(id);
  }
  return { saved, left };
}

function judge(desc: ScheduleDescription): Verdict {
  const { action, scheduleId } = desc;
  if (action.type !== 'startWorkflow' || action.workflowType !== REBUILD) return { leave: `it no longer starts ${REBUILD}` };
  const args = action.args ?? [];
  const split = splitWorkflowType(args[0]);
  if (split.workflowType === REBUILD) return { fine: true };
  if (split.workflowType !== undefined) return { leave: 'its input names another workflow type' };
  if (action.workflowId !== scheduleId) return { leave: `its runs are named ${action.workflowId}, not after the schedule` };
  const payloads = desc.raw.schedule?.action?.startWorkflow?.input?.payloads ?? [];
  const bound = payloads.map((p) => (p.metadata?.[METADATA_WORKFLOW_ID_KEY] ? Buffer.from(p.metadata[METADATA_WORKFLOW_ID_KEY]).toString() : undefined));
  if (payloads.length !== 1 || bound[0] !== scheduleId) return { leave: 'its input was not written for this schedule' };
  try {
    checkInput(workflowInputs.rebuild, split.input, REBUILD);
    // Saved as it was read: the workflow checks it again when it runs.
    return { input: split.input };
  } catch (err) {
    return { leave: reason(err).split('\n')[0] ?? 'its input is not a rebuild input' };
  }
}
