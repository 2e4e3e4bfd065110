import type { Request, Response, Router } from 'express';
import { z } from 'zod';
import { Client, WorkflowNotFoundError, type WorkflowExecutionDescription } from '@temporalio/client';
import { lastEventId, openEventStream, streamProgress, type Streams } from './sse';
import { HttpError } from './errors';
import { progressQuery, VM_OS, WORKFLOW_TYPES } from '../contract';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/observability/log';
import { EncryptionCodecError } from '../lib/temporal/codec';
import { actorOf, holdsRole, requireRole, tenantScope } from './guard';
import { tenantOfRun } from './tenancy';
import { STARTED_BY } from './startedBy';
import { stepTimeline } from './stepTimeline';
import { readAllEvents } from './installTimes';
import * as answers from './openapi/responses';
import { err, stream } from './openapi/answer';
import { defineRoutes } from './route';
import { routerFor } from './mountRoutes';

/** The workflow types the worker registers: nothing else in the namespace is this API's business. */
const OWN_TYPES: ReadonlySet<string> = new Set(WORKFLOW_TYPES);

/**
 * Every operation (install, start, migrate, rebuild, ...) is a workflow with the same
 * progress query, so one set of routes reads, re-attaches to and cancels any of them.
 * Mounted at /workflows/:workflowId and, for the seed's clients, /vm/install/:workflowId.
 *
 * Only QemuRun's own workflows (a registered type on the service's task queue) are shown
 * or cancelled: another application's workflow in the same namespace gets the same `404`
 * as one that does not exist (and is never queried: with no worker of ours to answer, a
 * query would wait until it timed out). So does one whose memo this deployment cannot
 * decode: it was sealed with keys of another deployment, or with a key since dropped.
 */
const notFound = (id: string) => new HttpError(404, `no workflow ${id}`);

export interface WorkflowRouteDeps {
  client: Client;
  config: Config;
  streams: Streams;
  logger: Logger;
}

function workflowReader({ client, config, logger }: WorkflowRouteDeps) {
  const taskQueue = config.temporal.taskQueue;

  /** The workflow's description when it is one of ours; undefined (answer 404) otherwise. */
  async function describeOwn(id: string): Promise<WorkflowExecutionDescription | undefined> {
    try {
      const d = await client.workflow.getHandle(id).describe();
      return OWN_TYPES.has(d.type) && d.taskQueue === taskQueue ? d : undefined;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      // describe() decodes the memo. One sealed with a key this deployment lacks (another
      // deployment on the namespace, a key dropped too early, a start by hand) is not a
      // workflow this service can run or read: the same 404 as another application's, and
      // a warning naming it and the missing key for whoever has to find its owner.
      if (err instanceof EncryptionCodecError) {
        logger.warn({ workflowId: id, reason: err.message }, `workflow ${id}: its memo cannot be decoded here (${err.message}): answered as not found`);
        return undefined;
      }
      throw err;
    }
  }

  /**
   * The workflow's description when it is one of ours and the caller's tenant's (tenants,
   * docs/security.md): another tenant's run answers as one that does not exist, as its VM does.
   */
  async function describeVisible(id: string, res: Response): Promise<WorkflowExecutionDescription | undefined> {
    const d = await describeOwn(id);
    const scope = tenantScope(res);
    if (!d || scope === undefined) return d;
    return (await tenantOfRun({ client, tokens: config.apiTokens }, d)) === scope ? d : undefined;
  }

  async function events(req: Request, res: Response, streams: Streams) {
    const id = String(req.params.workflowId);
    // One more watcher of a workflow streamed here already costs Temporal nothing: its
    // reader exists only because an earlier request passed the same check (a tenant's
    // token is checked every time: that request may have been another tenant's).
    const known = streams.readers.known(id) && tenantScope(res) === undefined;
    if (!known && !(await describeVisible(id, res))) throw notFound(id);
    openEventStream(res, id, streams.limiter);
    await streamProgress(streams.readers, req, res, client.workflow.getHandle(id), lastEventId(req));
  }

  async function status(req: Request, res: Response) {
    const id = String(req.params.workflowId);
    const d = await describeVisible(id, res);
    if (!d) throw notFound(id);
    const handle = client.workflow.getHandle(id);
    const status = d.status.name;
    const page = await handle.query(progressQuery, 0).catch(() => undefined);
    const result = status === 'COMPLETED' ? await handle.result() : undefined;
    const error = status === 'COMPLETED' ? undefined : page?.events.filter((e) => e.status === 'error').at(-1)?.message;
    res.json({
      success: true,
      workflowId: id,
      runId: d.runId,
      type: d.type,
      status,
      startTime: d.startTime,
      closeTime: d.closeTime,
      events: page?.lastSeq,
      // What a client polling an install (`Prefer: respond-async`) waits for, before the result.
      step: page?.step,
      vmid: page?.vm?.vmid ?? result?.vmid,
      ip: page?.vm?.ip ?? result?.ip,
      result,
      error,
    });
  }

  // Where the time went: read from the workflow's own progress record when someone asks.
  async function steps(req: Request, res: Response) {
    const id = String(req.params.workflowId);
    const d = await describeVisible(id, res);
    if (!d) throw notFound(id);
    const events = await readAllEvents(client.workflow.getHandle(id, d.runId));
    const vmOs = d.typedSearchAttributes.get(VM_OS);
    res.json({ success: true, workflowId: id, type: d.type, status: d.status.name, ...(vmOs ? { vmOs } : {}), steps: stepTimeline(events, d.status.name !== 'RUNNING') });
  }

  async function cancel(req: Request, res: Response) {
    const id = String(req.params.workflowId);
    const d = await describeVisible(id, res);
    if (!d) throw notFound(id);
    // The operate role cancels what its own token started; anything else is the admin's.
    const startedBy = d.memo?.[STARTED_BY];
    if (!holdsRole(res, config, 'admin') && (startedBy === undefined || startedBy !== actorOf(res))) {
      throw new HttpError(403, `this needs the admin role: workflow ${id} was not started with token ${actorOf(res)}`, { role: 'admin' });
    }
    if (d.status.name !== 'RUNNING') {
      throw new HttpError(409, `workflow ${id} has already finished (${d.status.name}); there is nothing to cancel`, { status: d.status.name });
    }
    try {
      // The run just described: a newer run under the same id (the next operation on a VM) is not what was asked about.
      await client.workflow.getHandle(id, d.runId).cancel();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw notFound(id);
      throw err;
    }
    res.status(202).json({ success: true, message: 'cancellation requested; a VM the operation created will be removed' });
  }

  return { events, status, steps, cancel };
}

const NO_SUCH_WORKFLOW = err('no such QemuRun workflow');

export const workflowRouteGroup = defineRoutes({
  stage: 'api',
  at: ['/api/workflows/:workflowId', '/api/vm/install/:workflowId'],
  setup: (deps: WorkflowRouteDeps) => ({ ...workflowReader(deps), streams: deps.streams }),
  routes: [
    {
      method: 'GET',
      path: '/events',
      summary: "An operation's events again, or from Last-Event-ID on",
      headers: ['Last-Event-ID'],
      query: { after: { schema: z.string().regex(/^\d+$/), description: 'as Last-Event-ID' } },
      answers: { 200: stream('the events, until `event: close`'), 400: err('Last-Event-ID is not a number'), 404: NO_SUCH_WORKFLOW },
      limits: { stream: true },
      handle: (w, req, res) => w.events(req, res, w.streams),
    },
    {
      method: 'GET',
      path: '/',
      summary: "An operation's status, step, VMID and IP, and its result",
      answers: { 200: { description: 'the status', json: answers.workflowStatus }, 404: NO_SUCH_WORKFLOW },
      handle: (w, req, res) => w.status(req, res),
    },
    {
      method: 'GET',
      path: '/steps',
      summary: "Where an operation's time went: each step's first and last event, from the workflow's own record",
      answers: { 200: { description: 'the steps in the order they began', json: answers.stepTimeline }, 404: NO_SUCH_WORKFLOW },
      handle: (w, req, res) => w.steps(req, res),
    },
    {
      method: 'POST',
      path: '/cancel',
      summary: 'Cancel an operation; a VM it created is removed. The operate role cancels what its own token started; the admin anything',
      role: 'operate',
      answers: { 202: { description: 'cancellation requested', json: answers.cancelAccepted }, 404: NO_SUCH_WORKFLOW, 409: err('already finished') },
      handle: (w, req, res) => w.cancel(req, res),
    },
  ],
});

/** The routes alone, for a server that mounts them itself at `/workflows/:workflowId`. */
export function workflowRoutes(client: Client, config: Config, streams: Streams, logger: Logger): Router {
  return routerFor(workflowRouteGroup, { client, config, streams, logger }, { guard: (role) => requireRole(config, role), limiter: streams.limiter });
}
