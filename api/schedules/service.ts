import {
  Client,
  ScheduleAlreadyRunning,
  type ScheduleDescription,
  type ScheduleHandle,
  ScheduleNotFoundError,
  type ScheduleOptions,
  type ScheduleUpdateOptions,
  WorkflowFailedError,
} from '@temporalio/client';
import {
  type RebuildInput,
  type RebuildTarget,
  splitWorkflowType,
  vmSearchAttributes,
  workflowInputs,
  type Workflows,
  type WorkflowType,
} from '../../contract';
import { listScheduleEntries, memoFieldOf, type ListedScheduleEntry } from '../../lib/temporal/scheduleListing';
import { HttpError, InvalidRequestError } from '../errors';

/** Marks the schedules this API manages; others in the namespace are not its business. */
export const WORKFLOW_TYPE: WorkflowType = 'scheduledRebuild';

/** A rebuild schedule as the list shows it: the server's entry, and the VMID its memo names (null: unreadable). */
export interface ListedRebuild {
  entry: ListedScheduleEntry;
  vmid: number | null;
}

/** A schedule of ours: its handle, its description and the rebuild it runs, read back through the codec. */
export interface RebuildSchedule {
  handle: ScheduleHandle;
  desc: ScheduleDescription;
  input: RebuildInput;
}

/**
 * The rebuild a schedule's action runs, checked with the workflow's own input rules rather
 * than cast: a schedule made by another version (or by hand) that does not follow them is
 * reported, not acted on.
 */
export function rebuildInputOf(desc: Pick<ScheduleDescription, 'scheduleId' | 'action'>): RebuildInput {
  // Without the workflow type its input names (saved by versions before that, the run refuses it; saving it again adds it).
  const parsed = workflowInputs.rebuild.safeParse(splitWorkflowType(desc.action.args?.[0]).input);
  if (!parsed.success) throw new HttpError(500, `schedule ${desc.scheduleId} holds a rebuild input this version cannot read`);
  return parsed.data;
}

/** Search attributes of a rebuild's runs: findable by VM, node, OS and name in the Temporal UI. */
export function actionAttributes(target: RebuildTarget) {
  const { spec } = target;
  return vmSearchAttributes('rebuild', spec, { vmid: target.vmid, node: spec.node ?? target.mainNode });
}

/** The Temporal calls behind /api/schedules, with Temporal's refusals as HttpErrors. */
export function scheduleService(client: Client) {
  const schedules = client.schedule;

  /** The client turns the server's "Invalid schedule spec" into a TypeError: a 400 naming the field. */
  async function specChecked<T>(timing: { cron?: string }, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      const field = /time ?zone|location/i.test(err.message) ? 'timezone' : timing.cron !== undefined ? 'cron' : 'interval';
      throw new InvalidRequestError(`${field}: the server refused it: ${err.message}`);
    }
  }

  return {
    /** One of our schedules, or a 404. */
    async load(id: string): Promise<RebuildSchedule> {
      const handle = schedules.getHandle(id);
      try {
        const desc = await handle.describe();
        if (desc.action.workflowType === WORKFLOW_TYPE) return { handle, desc, input: rebuildInputOf(desc) };
      } catch (err) {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      }
      throw new HttpError(404, `no schedule ${id}`);
    },

    async create(options: ScheduleOptions, timing: { cron?: string }): Promise<ScheduleDescription> {
      try {
        await specChecked(timing, () => schedules.create(options));
      } catch (err) {
        if (err instanceof ScheduleAlreadyRunning) throw new HttpError(409, `schedule ${options.scheduleId} already exists; update or delete it`);
        throw err;
      }
      return schedules.getHandle(options.scheduleId).describe();
    },

    async update(handle: ScheduleHandle, timing: { cron?: string }, fn: (prev: ScheduleDescription) => ScheduleUpdateOptions): Promise<ScheduleDescription> {
      await specChecked(timing, () => handle.update(fn));
      return handle.describe();
    },

    /** Our rebuild schedules, from the raw listing: one schedule nobody here can decode must not hide the rest. */
    async *listRebuilds(): AsyncGenerator<ListedRebuild> {
      for await (const entry of listScheduleEntries(client, client.options.namespace)) {
        if (entry.info?.workflowType?.name !== WORKFLOW_TYPE) continue;
        const vmid = await memoFieldOf(client, entry, 'vmid');
        yield { entry, vmid: typeof vmid === 'number' ? vmid : null };
      }
    },

    /** What one run did: rebuilt, skipped (and why), failed (and why), or still running. */
    async outcomeOf(workflowId: string, runId: string): Promise<Record<string, unknown>> {
      const handle = client.workflow.getHandle<Workflows['scheduledRebuild']>(workflowId, runId);
      try {
        const d = await handle.describe();
        const status = d.status.name;
        if (status === 'RUNNING') return { status, outcome: 'running' };
        if (status === 'COMPLETED') {
          const r = await handle.result();
          return r.outcome === 'rebuilt'
            ? { status, outcome: 'rebuilt', rebuildWorkflowId: r.rebuildWorkflowId, elapsedSec: r.rebuild.elapsedSec }
            : { status, outcome: 'skipped', reason: r.reason };
        }
        const error = await handle.result().then(
          () => undefined,
          (err: unknown) => (err instanceof WorkflowFailedError ? (err.cause?.message ?? err.message) : String(err)),
        );
        return { status, outcome: 'failed', error };
      } catch (err) {
        return { status: 'UNKNOWN', outcome: 'unknown', error: String(err) };
      }
    },
  };
}

