import type { Request, Response } from 'express';
import { Client, ScheduleOverlapPolicy } from '@temporalio/client';
import type { z } from 'zod';
import { type InstallSpec, type RebuildInput, rebuildScheduleId, VM_OPERATION, withWorkflowType } from '../../contract';
import type { Config } from '../../lib/config';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { tenantOf } from '../guard';
import { toInstallSpec } from '../installRequest';
import { checkRebuildTarget } from '../rebuildCheck';
import { HttpError, InvalidRequestError, parseInput } from '../errors';
import { createScheduleSchema, cronShortestGapMs, formatInterval, parseInterval, reasonSchema, timingOf, toScheduleSpec, updateScheduleSchema } from './request';
import { actionAttributes, scheduleService, WORKFLOW_TYPE } from './service';
import { presentListed, presentRecentRuns, presentSchedule } from './presentation';
import * as answers from '../openapi/responses';
import { err } from '../openapi/answer';
import { defineRoutes } from '../route';

export interface ScheduleRouteDeps {
  config: Config;
  client: Client;
  knownNodes: string[];
  proxmox: ProxmoxCluster;
}

/** Missed runs (server down) are made up only this late; a rebuild hours late could land in working hours. */
const CATCHUP_WINDOW = '15m';

/**
 * Periodic rebuilds as Temporal Schedules, under /api/schedules. Each run is a
 * `scheduledRebuild` workflow (id `<schedule id>-<scheduled time>`) that rebuilds the VM as
 * `vm-<vmid>`, so a run finding another operation on the VM skips and says so. The action's
 * arguments (which may hold the cloud-init password) go through the payload codec; memo,
 * note and search attributes never hold a secret.
 */
function scheduleActions({ config, client, knownNodes, proxmox }: ScheduleRouteDeps) {
  const schedules = scheduleService(client);
  const check = (vmid: number, spec?: InstallSpec) => checkRebuildTarget({ config, proxmox, client }, { vmid, spec });

  /**
   * Rebuilds more often than SCHEDULE_MIN_INTERVAL are refused: each destroys and re-creates
   * a VM, and a schedule is a way to make the cluster do that unattended, forever.
   */
  function checkFrequency(body: { cron?: string; interval?: string }): void {
    const min = config.schedules.minIntervalMs;
    const field = body.cron !== undefined ? 'cron' : body.interval !== undefined ? 'interval' : undefined;
    if (field === undefined) return;
    const gap = field === 'cron' ? cronShortestGapMs(body.cron!) : parseInterval(body.interval!)!;
    if (gap < min) {
      throw new InvalidRequestError(
        `${field}: runs every ${formatInterval(gap)} at the shortest; rebuilds may run at most every ${formatInterval(min)} (SCHEDULE_MIN_INTERVAL)`,
      );
    }
  }

  /**
   * Creates run one at a time in this process, from the count to the create: counted side by
   * side, 150 creates all saw room for one more. Schedules are listed from visibility, which
   * shows a new one a moment later, so those made here count until it lists them (at most a
   * minute). Several API processes each hold their own lock: together they may pass the
   * limit by the creates that overlap between them.
   */
  let queue: Promise<unknown> = Promise.resolve();
  function oneAtATime<T>(f: () => Promise<T>): Promise<T> {
    const run = queue.then(f, f);
    queue = run.catch(() => undefined);
    return run;
  }
  const madeHere = new Map<string, number>();
  const LISTED_WITHIN_MS = 60_000;

  /** SCHEDULE_MAX_COUNT rebuild schedules at most (0: no limit): each is a standing order on the cluster. */
  async function checkCount(): Promise<void> {
    if (config.schedules.maxCount === 0) return;
    const listed = new Set<string>();
    for await (const { entry } of schedules.listRebuilds()) listed.add(entry.scheduleId ?? '');
    for (const [id, at] of madeHere) if (listed.has(id) || Date.now() - at > LISTED_WITHIN_MS) madeHere.delete(id);
    const count = listed.size + madeHere.size;
    if (count >= config.schedules.maxCount) {
      throw new HttpError(409, `there are already ${count} rebuild schedules, SCHEDULE_MAX_COUNT (${config.schedules.maxCount}); delete one first`);
    }
  }

  /** The install spec a `spec` body field describes, checked like an install body; `id` is required. */
  function specFromBody(raw: unknown, tenant: string | undefined): { spec: InstallSpec; passwd?: string } {
    // The VM a schedule re-creates from its own spec belongs to the admin token's tenant, as an admin's install does.
    const { spec, secrets } = withPrefix('spec', () => toInstallSpec(raw, config, knownNodes, tenant));
    if (spec.vmid === undefined) throw new InvalidRequestError('spec.id: is required (the VMID the schedule rebuilds)');
    // A rebuild re-creates the VM from its spec, which holds no user-data (a secret): refused, not dropped.
    if (secrets.userData !== undefined) throw new InvalidRequestError('spec.userData: is not kept by a schedule: a rebuild re-creates the VM without user-data');
    const given = (raw as { passwd?: unknown }).passwd;
    return { spec, passwd: typeof given === 'string' ? secrets.passwd : undefined };
  }

  async function create(req: Request, res: Response) {
    const body = parseInput(createScheduleSchema, req.body);
    checkFrequency(body);
    const desc = await oneAtATime(() => createCounted(body, tenantOf(res)));
    res.status(201).json({ success: true, schedule: presentSchedule(desc) });
  }

  async function createCounted(body: z.infer<typeof createScheduleSchema>, tenant: string | undefined) {
    await checkCount();
    let input: RebuildInput;
    if (body.spec !== undefined) {
      const { spec, passwd } = specFromBody(body.spec, tenant);
      input = { vmid: spec.vmid as number, spec, ...(passwd !== undefined ? { passwd } : {}) };
    } else {
      input = { vmid: body.vmid as number, ...(body.passwd !== undefined ? { passwd: body.passwd } : {}) };
    }
    const target = await check(input.vmid, input.spec);
    const scheduleId = body.id ?? rebuildScheduleId(input.vmid);
    const desc = await schedules.create(
      {
        scheduleId,
        spec: toScheduleSpec(body),
        action: {
          type: 'startWorkflow',
          workflowType: WORKFLOW_TYPE,
          // The run is a scheduledRebuild and its input says so (contract/workflows.ts).
          args: withWorkflowType(WORKFLOW_TYPE, [input]),
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
      },
      body,
    );
    madeHere.set(desc.scheduleId, Date.now());
    return desc;
  }

  async function list(res: Response) {
    const list = [];
    for await (const s of schedules.listRebuilds()) list.push(presentListed(s));
    list.sort((a, b) => a.id.localeCompare(b.id));
    res.json({ success: true, count: list.length, schedules: list });
  }

  async function show(req: Request, res: Response) {
    const { desc } = await schedules.load(String(req.params.id));
    res.json({ success: true, schedule: { ...presentSchedule(desc), recentRuns: await presentRecentRuns(desc, schedules.outcomeOf) } });
  }

  async function pause(req: Request, res: Response, op: 'pause' | 'unpause') {
    const body = parseInput(reasonSchema, req.body);
    const { handle } = await schedules.load(String(req.params.id));
    await handle[op](body.reason ?? `${op}d through the QemuRun API`);
    res.json({ success: true, schedule: presentSchedule(await handle.describe()) });
  }

  /**
   * Runs the schedule's action now, under the schedule's own overlap policy (the SDK's
   * default for a trigger is ALLOW_ALL). Temporal runs a manual trigger even on a paused
   * schedule; this API refuses it instead, so that "paused" means no runs at all.
   */
  async function trigger(req: Request, res: Response) {
    const { desc, handle, input } = await schedules.load(String(req.params.id));
    if (desc.state.paused) {
      throw new HttpError(
        409,
        `schedule ${desc.scheduleId} is paused (${desc.state.note ?? 'no reason given'}); unpause it first, or rebuild now with POST /api/vm/${input.vmid}/rebuild`,
      );
    }
    await handle.trigger(desc.policies.overlap);
    res.status(202).json({ success: true, message: `schedule ${desc.scheduleId} triggered (overlap policy ${desc.policies.overlap})` });
  }

  async function update(req: Request, res: Response) {
    const body = parseInput(updateScheduleSchema, req.body);
    checkFrequency(body);
    const { desc, handle, input: current } = await schedules.load(String(req.params.id));
    let input: RebuildInput = { ...current };
    let attributes: ReturnType<typeof actionAttributes> | undefined;
    if (body.spec !== undefined) {
      if (!current.spec) throw new InvalidRequestError('spec: this schedule rebuilds from the spec its VM records; it takes no spec');
      const { spec, passwd } = specFromBody(body.spec, tenantOf(res));
      if (spec.vmid !== current.vmid) throw new InvalidRequestError(`spec.id: must stay ${current.vmid}; make another schedule for another VM`);
      input = { ...input, spec, ...(passwd !== undefined ? { passwd } : {}) };
      attributes = actionAttributes(await check(spec.vmid, spec));
    }
    if (body.passwd !== undefined) input = { ...input, passwd: body.passwd };
    const timing = { ...timingOf(desc.spec), ...(body.timezone ? { timezone: body.timezone } : {}) };
    const retimed = body.cron !== undefined || body.interval !== undefined || body.timezone !== undefined;
    const spec = retimed
      ? toScheduleSpec(body.cron !== undefined || body.interval !== undefined ? { ...body, timezone: timing.timezone } : timing)
      : desc.spec;
    const updated = await schedules.update(handle, body, (prev) => ({
      ...prev,
      spec,
      action: { ...prev.action, args: withWorkflowType(WORKFLOW_TYPE, [input]), ...(attributes ? { typedSearchAttributes: attributes } : {}) },
      policies: { ...prev.policies, overlap: body.overlap ?? prev.policies.overlap },
      state: {
        paused: body.paused ?? prev.state.paused,
        note: body.note ?? prev.state.note,
        remainingActions: prev.state.remainingActions,
      },
    }));
    res.json({ success: true, schedule: presentSchedule(updated) });
  }

  async function remove(req: Request, res: Response) {
    const { desc, handle } = await schedules.load(String(req.params.id));
    await handle.delete();
    madeHere.delete(desc.scheduleId);
    res.json({ success: true, message: `schedule ${desc.scheduleId} deleted; runs it already started are not affected` });
  }

  return { create, list, show, pause, trigger, update, remove };
}

const NO_SUCH_SCHEDULE = err('no such schedule');
const changeSchedule = {
  summary: "Change a schedule's timing, overlap, note or password",
  role: 'admin',
  body: updateScheduleSchema,
  answers: { 200: { description: 'changed', json: answers.scheduleAnswer }, 400: err('the body is invalid'), 404: NO_SUCH_SCHEDULE },
  handle: (s: ReturnType<typeof scheduleActions>, req: Request, res: Response) => s.update(req, res),
} as const;
const pauseRoute = (op: 'pause' | 'unpause') =>
  ({
    method: 'POST',
    path: `/schedules/:id/${op}`,
    summary: `${op === 'pause' ? 'Pause' : 'Unpause'} a schedule`,
    role: 'admin',
    body: reasonSchema,
    answers: { 200: { description: 'done', json: answers.scheduleAnswer }, 404: NO_SUCH_SCHEDULE },
    handle: (s: ReturnType<typeof scheduleActions>, req: Request, res: Response) => s.pause(req, res, op),
  }) as const;

export const scheduleRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: scheduleActions,
  routes: [
    {
      method: 'POST',
      path: '/schedules',
      summary: 'Create a rebuild schedule (exactly one of cron, every, at; either vmid or spec)',
      role: 'admin',
      body: createScheduleSchema,
      answers: {
        201: { description: 'created', json: answers.scheduleAnswer },
        400: err('the body is invalid, or the schedule runs more often than SCHEDULE_MIN_INTERVAL'),
        409: err('the id exists, or there are SCHEDULE_MAX_COUNT rebuild schedules already'),
      },
      handle: (s, req, res) => s.create(req, res),
    },
    {
      method: 'GET',
      path: '/schedules',
      summary: 'Rebuild schedules',
      answers: { 200: { description: 'the schedules', json: answers.scheduleAnswer } },
      handle: (s, _req, res) => s.list(res),
    },
    {
      method: 'GET',
      path: '/schedules/:id',
      summary: 'One schedule with its next and recent runs',
      answers: { 200: { description: 'the schedule', json: answers.scheduleAnswer }, 404: NO_SUCH_SCHEDULE },
      handle: (s, req, res) => s.show(req, res),
    },
    pauseRoute('pause'),
    pauseRoute('unpause'),
    {
      method: 'POST',
      path: '/schedules/:id/trigger',
      summary: 'Run a schedule now',
      role: 'admin',
      answers: { 202: { description: 'started', json: answers.scheduleAnswer }, 404: NO_SUCH_SCHEDULE },
      handle: (s, req, res) => s.trigger(req, res),
    },
    { method: 'PATCH', path: '/schedules/:id', ...changeSchedule },
    // The same for clients limited to GET and POST (the API's CORS rule lists no PATCH).
    { method: 'POST', path: '/schedules/:id/update', ...changeSchedule },
    {
      method: 'DELETE',
      path: '/schedules/:id',
      summary: 'Delete a schedule (its runs stay in history)',
      role: 'admin',
      answers: { 200: { description: 'deleted', json: answers.scheduleAnswer }, 404: NO_SUCH_SCHEDULE },
      handle: (s, req, res) => s.remove(req, res),
    },
  ],
});

/** Field names inside a nested install body read `spec.os`, not `os`. */
function withPrefix<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof InvalidRequestError) {
      throw new InvalidRequestError(
        err.problem.replace(/(^|; )(?!unknown field)([a-z]+):/g, `$1${prefix}.$2:`).replace(/unknown field\(s\): /, `${prefix}: unknown field(s): `),
      );
    }
    throw err;
  }
}
