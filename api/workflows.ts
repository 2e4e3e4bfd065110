import { Router, Request, Response } from 'express';
import { Client, WorkflowNotFoundError, type WorkflowExecutionDescription } from '@temporalio/client';
import { lastEventId, openEventStream, streamProgress, type Streams } from './sse';
import { limitsFor } from './limits';
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

export function workflowRoutes(client: Client, config: Config, streams: Streams, logger: Logger): Router {
  const router = Router({ mergeParams: true });
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

  router.get('/events', ...limitsFor({ stream: true }, streams.limiter), async (req: Request, res: Response) => {
    const id = String(req.params.workflowId);
    // One more watcher of a workflow streamed here already costs Temporal nothing: its
    // reader exists only because an earlier request passed the same check (a tenant's
    // token is checked every time: that request may have been another tenant's).
    const known = streams.readers.known(id) && tenantScope(res) === undefined;
    if (!known && !(await describeVisible(id, res))) throw notFound(id);
    openEventStream(res, id, streams.limiter);
    await streamProgress(streams.readers, req, res, client.workflow.getHandle(id), lastEventId(req));
  });

  router.get('/', async (req: Request, res: Response) => {
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
  });

  // Where the time went: read from the workflow's own progress record when someone asks.
  router.get('/steps', async (req: Request, res: Response) => {
    const id = String(req.params.workflowId);
    const d = await describeVisible(id, res);
    if (!d) throw notFound(id);
    const events = await readAllEvents(client.workflow.getHandle(id, d.runId));
    const vmOs = d.typedSearchAttributes.get(VM_OS);
    res.json({ success: true, workflowId: id, type: d.type, status: d.status.name, ...(vmOs ? { vmOs } : {}), steps: stepTimeline(events, d.status.name !== 'RUNNING') });
  });

  router.post('/cancel', requireRole(config, 'operate'), async (req: Request, res: Response) => {
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
  });

  return router;
}
