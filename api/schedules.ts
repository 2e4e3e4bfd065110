import {
  type InstallSpec,
  type RebuildInput,
  rebuildScheduleId,
  type RebuildTarget,
  type ScheduledRebuildResult,
  VM_ID,
  VM_NAME,
  VM_NODE,
  VM_OPERATION,
  VM_OS,
  vmName,
  type WorkflowType,
} from '../contract';
import { Router, Request, Response } from 'express';
import {
  Client,
  ScheduleAlreadyRunning,
  ScheduleDescription,
  ScheduleHandle,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  WorkflowFailedError,
} from '@temporalio/client';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import { requireMutationAccess } from './guard';
import { describeIssues, InvalidRequestError, toInstallSpec } from './installRequest';
import { checkRebuildTarget, RebuildRefused } from './rebuildCheck';
import { badInput } from './rebuild';
import {
  createScheduleSchema,
  reasonSchema,
  timingOf,
  toScheduleSpec,
  updateScheduleSchema,
} from './schedulesRequest';

export interface ScheduleRouteDeps {
  config: Config;
  client: Client;
  knownNodes: string[];
  executors: Record<string, NodeExecutor>;
}

/** Marks the schedules this API manages; others in the namespace are not its business. */
const WORKFLOW_TYPE: WorkflowType = 'scheduledRebuild';
/** Missed runs (server down) are made up only this late; a rebuild hours late could land in working hours. */
const CATCHUP_WINDOW = '15m';

/**
 * Periodic rebuilds as Temporal Schedules, under /api/schedules. Each run is a
 * `scheduledRebuild` workflow (id `<schedule id>-<scheduled time>`) that rebuilds the VM as
 * `vm-<vmid>`, so a run finding another operation on the VM skips and says so. The action's
 * arguments (which may hold the cloud-init password) go through the payload codec; memo,
 * note and search attributes never hold a secret.
 */
export function scheduleRoutes({ config, client, knownNodes, executors }: ScheduleRouteDeps): Router {
  const router = Router();
  const guard = requireMutationAccess(config);
  const schedules = client.schedule;

  /** The handle and description of one of our schedules, or a 404 answered. */
  async function load(req: Request, res: Response): Promise<{ handle: ScheduleHandle; desc: ScheduleDescription } | undefined> {
    const id = String(req.params.id);
    const handle = schedules.getHandle(id);
    try {
      const desc = await handle.describe();
      if (desc.action.workflowType === WORKFLOW_TYPE) return { handle, desc };
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    res.status(404).json({ success: false, message: `no schedule ${id}` });
    return undefined;
  }

  /** A check refusal, a name taken, or a spec the server refuses: the client's answer. */
  function answerFailure(err: unknown, res: Response, id?: string): boolean {
    if (err instanceof RebuildRefused) {
      res.status(err.status).json({ success: false, message: err.message });
      return true;
    }
    if (err instanceof InvalidRequestError) {
      badInput(res, err.message);
      return true;
    }
    if (err instanceof ScheduleAlreadyRunning) {
      res.status(409).json({ success: false, message: `schedule ${id} already exists; update or delete it` });
      return true;
    }
    return false;
  }

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

  /** The install spec a `spec` body field describes, checked like an install body; `id` is required. */
  function specFromBody(raw: unknown): { spec: InstallSpec; passwd?: string } {
    const { spec, secrets } = toInstallSpec(raw, config, knownNodes);
    if (spec.vmid === undefined) throw new InvalidRequestError('spec.id: is required (the VMID the schedule rebuilds)');
    const given = (raw as { passwd?: unknown }).passwd;
    return { spec, passwd: typeof given === 'string' ? secrets.passwd : undefined };
  }

  function actionAttributes(target: RebuildTarget) {
    const { spec } = target;
    return [
      { key: VM_ID, value: target.vmid },
      { key: VM_NODE, value: spec.node ?? target.mainNode },
      { key: VM_OS, value: `${spec.os}-${spec.version}` },
      { key: VM_NAME, value: vmName(spec.name, target.vmid) },
      { key: VM_OPERATION, value: 'rebuild' },
    ];
  }

  router.post('/schedules', guard, async (req: Request, res: Response) => {
    const parsed = createScheduleSchema.safeParse(req.body ?? {}, { reportInput: true });
    if (!parsed.success) return badInput(res, describeIssues(parsed.error, req.body ?? {}));
    const body = parsed.data;
    try {
      let input: RebuildInput;
      if (body.spec !== undefined) {
        const { spec, passwd } = withPrefix('spec', () => specFromBody(body.spec));
        input = { vmid: spec.vmid as number, spec, ...(passwd !== undefined ? { passwd } : {}) };
      } else {
        input = { vmid: body.vmid as number, ...(body.passwd !== undefined ? { passwd: body.passwd } : {}) };
      }
      const target = await checkRebuildTarget({ config, executors, client }, { vmid: input.vmid, spec: input.spec });
      const scheduleId = body.id ?? rebuildScheduleId(input.vmid);
      await specChecked(body, () => schedules.create({
        scheduleId,
        spec: toScheduleSpec(body),
        action: {
          type: 'startWorkflow',
          workflowType: WORKFLOW_TYPE,
          args: [input],
          taskQueue: config.temporal.taskQueue,
          // Temporal appends the scheduled time: rebuild-vm-120-2026-01-01T03:00:00Z.
          workflowId: scheduleId,
          typedSearchAttributes: actionAttributes(target),
          staticSummary: `scheduled rebuild of VM ${input.vmid} (schedule ${scheduleId})`,
        },
        policies: { overlap: body.overlap ?? ScheduleOverlapPolicy.SKIP, pauseOnFailure: true, catchupWindow: CATCHUP_WINDOW },
        state: { paused: body.paused ?? false, ...(body.note ? { note: body.note } : {}) },
        memo: { qemurun: 'rebuild', vmid: input.vmid, source: input.spec ? 'spec' : 'recorded' },
        typedSearchAttributes: actionAttributes(target).filter((a) => a.key !== VM_OPERATION),
      }));
      const desc = await schedules.getHandle(scheduleId).describe();
      res.status(201).json({ success: true, schedule: await present(desc, false) });
    } catch (err) {
      if (answerFailure(err, res, body.id ?? (body.vmid !== undefined ? rebuildScheduleId(body.vmid) : 'rebuild-vm-?'))) return;
      throw err;
    }
  });

  router.get('/schedules', async (_req: Request, res: Response) => {
    const list = [];
    for await (const s of schedules.list()) {
      if (s.action?.workflowType !== WORKFLOW_TYPE) continue;
      const last = s.info.recentActions.at(-1);
      list.push({
        id: s.scheduleId,
        vmid: (s.memo?.vmid as number | undefined) ?? null,
        ...(s.spec ? timingOf(s.spec) : {}),
        paused: s.state.paused,
        note: s.state.note ?? null,
        nextRun: s.info.nextActionTimes[0]?.toISOString() ?? null,
        lastRun: last ? { scheduledAt: last.scheduledAt.toISOString(), workflowId: last.action.workflow.workflowId } : null,
      });
    }
    list.sort((a, b) => a.id.localeCompare(b.id));
    res.json({ success: true, count: list.length, schedules: list });
  });

  router.get('/schedules/:id', async (req: Request, res: Response) => {
    const found = await load(req, res);
    if (!found) return;
    res.json({ success: true, schedule: await present(found.desc, true) });
  });

  router.post('/schedules/:id/pause', guard, async (req: Request, res: Response) => {
    const body = reasonSchema.safeParse(req.body ?? {}, { reportInput: true });
    if (!body.success) return badInput(res, describeIssues(body.error, req.body ?? {}));
    const found = await load(req, res);
    if (!found) return;
    await found.handle.pause(body.data.reason ?? 'paused through the QemuRun API');
    res.json({ success: true, schedule: await present(await found.handle.describe(), false) });
  });

  router.post('/schedules/:id/unpause', guard, async (req: Request, res: Response) => {
    const body = reasonSchema.safeParse(req.body ?? {}, { reportInput: true });
    if (!body.success) return badInput(res, describeIssues(body.error, req.body ?? {}));
    const found = await load(req, res);
    if (!found) return;
    await found.handle.unpause(body.data.reason ?? 'unpaused through the QemuRun API');
    res.json({ success: true, schedule: await present(await found.handle.describe(), false) });
  });

  /**
   * Runs the schedule's action now, under the schedule's own overlap policy (the SDK's
   * default for a trigger is ALLOW_ALL). Temporal runs a manual trigger even on a paused
   * schedule; this API refuses it instead, so that "paused" means no runs at all.
   */
  router.post('/schedules/:id/trigger', guard, async (req: Request, res: Response) => {
    const found = await load(req, res);
    if (!found) return;
    const { desc, handle } = found;
    if (desc.state.paused) {
      const vmid = (desc.action.args?.[0] as RebuildInput | undefined)?.vmid;
      res.status(409).json({
        success: false,
        message: `schedule ${desc.scheduleId} is paused (${desc.state.note ?? 'no reason given'}); unpause it first${vmid ? `, or rebuild now with POST /api/vm/${vmid}/rebuild` : ''}`,
      });
      return;
    }
    await handle.trigger(desc.policies.overlap);
    res.status(202).json({ success: true, message: `schedule ${desc.scheduleId} triggered (overlap policy ${desc.policies.overlap})` });
  });

  async function update(req: Request, res: Response) {
    const parsed = updateScheduleSchema.safeParse(req.body ?? {}, { reportInput: true });
    if (!parsed.success) return badInput(res, describeIssues(parsed.error, req.body ?? {}));
    const body = parsed.data;
    const found = await load(req, res);
    if (!found) return;
    const { desc, handle } = found;
    const current = desc.action.args?.[0] as RebuildInput;
    try {
      let input: RebuildInput = { ...current };
      let attributes: ReturnType<typeof actionAttributes> | undefined;
      if (body.spec !== undefined) {
        if (!current.spec) throw new InvalidRequestError('spec: this schedule rebuilds from the spec its VM records; it takes no spec');
        const { spec, passwd } = withPrefix('spec', () => specFromBody(body.spec));
        if (spec.vmid !== current.vmid) throw new InvalidRequestError(`spec.id: must stay ${current.vmid}; make another schedule for another VM`);
        input = { ...input, spec, ...(passwd !== undefined ? { passwd } : {}) };
        attributes = actionAttributes(await checkRebuildTarget({ config, executors, client }, { vmid: spec.vmid, spec }));
      }
      if (body.passwd !== undefined) input = { ...input, passwd: body.passwd };
      const timing = { ...timingOf(desc.spec), ...(body.timezone ? { timezone: body.timezone } : {}) };
      const retimed = body.cron !== undefined || body.interval !== undefined || body.timezone !== undefined;
      const spec = retimed
        ? toScheduleSpec(body.cron !== undefined || body.interval !== undefined ? { ...body, timezone: timing.timezone } : timing)
        : desc.spec;
      await specChecked(body, () => handle.update((prev) => ({
        ...prev,
        spec,
        action: { ...prev.action, args: [input], ...(attributes ? { typedSearchAttributes: attributes } : {}) },
        policies: { ...prev.policies, overlap: body.overlap ?? prev.policies.overlap },
        state: {
          paused: body.paused ?? prev.state.paused,
          note: body.note ?? prev.state.note,
          remainingActions: prev.state.remainingActions,
        },
      })));
      res.json({ success: true, schedule: await present(await handle.describe(), false) });
    } catch (err) {
      if (answerFailure(err, res, desc.scheduleId)) return;
      throw err;
    }
  }
  router.patch('/schedules/:id', guard, update);
  // The same for clients limited to GET and POST (the API's CORS rule lists no PATCH).
  router.post('/schedules/:id/update', guard, update);

  router.delete('/schedules/:id', guard, async (req: Request, res: Response) => {
    const found = await load(req, res);
    if (!found) return;
    await found.handle.delete();
    res.json({ success: true, message: `schedule ${found.desc.scheduleId} deleted; runs it already started are not affected` });
  });

  /**
   * A schedule as the API shows it. The action's arguments are decoded through the codec,
   * so the password is dropped here: it is never shown.
   */
  async function present(desc: ScheduleDescription, withRuns: boolean) {
    const input = desc.action.args?.[0] as RebuildInput | undefined;
    const base = {
      id: desc.scheduleId,
      vmid: input?.vmid ?? null,
      source: input?.spec ? 'spec' : 'recorded',
      ...(input?.spec ? { spec: input.spec } : {}),
      passwd: input?.passwd !== undefined ? 'set' : 'default',
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
    if (!withRuns) return base;
    const recentRuns = await Promise.all(
      desc.info.recentActions.map(async (a) => ({
        scheduledAt: a.scheduledAt.toISOString(),
        startedAt: a.takenAt.toISOString(),
        workflowId: a.action.workflow.workflowId,
        runId: a.action.workflow.firstExecutionRunId,
        ...(await outcomeOf(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId)),
      })),
    );
    return { ...base, recentRuns };
  }

  /** What one run did: rebuilt, skipped (and why), failed (and why), or still running. */
  async function outcomeOf(workflowId: string, runId: string): Promise<Record<string, unknown>> {
    const handle = client.workflow.getHandle(workflowId, runId);
    try {
      const d = await handle.describe();
      const status = d.status.name;
      if (status === 'RUNNING') return { status, outcome: 'running' };
      if (status === 'COMPLETED') {
        const r = (await handle.result()) as ScheduledRebuildResult;
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
  }

  return router;
}

/** Field names inside a nested install body read `spec.os`, not `os`. */
function withPrefix<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof InvalidRequestError) {
      throw new InvalidRequestError(err.message.replace(/(^|; )(?!unknown field)([a-z]+):/g, `$1${prefix}.$2:`).replace(/unknown field\(s\): /, `${prefix}: unknown field(s): `));
    }
    throw err;
  }
}

