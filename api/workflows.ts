import { Router, Request, Response, RequestHandler } from 'express';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { lastEventId, openEventStream, streamProgress } from './sse';
import { progressReaders } from './progressReader';
import { progressQuery } from '../workflows/progress';

/**
 * Every operation (install, start, migrate, rebuild, ...) is a workflow with the same
 * progress query, so one set of routes reads, re-attaches to and cancels any of them.
 * Mounted at /workflows/:workflowId and, for the seed's clients, /vm/install/:workflowId.
 */
export function workflowRoutes(client: Client, guard: RequestHandler): Router {
  const router = Router({ mergeParams: true });
  const notFound = (res: Response, id: string) => res.status(404).json({ success: false, message: `no workflow ${id}` });

  router.get('/events', async (req: Request, res: Response) => {
    const id = String(req.params.workflowId);
    const handle = client.workflow.getHandle(id);
    // One more watcher of a workflow streamed here already costs Temporal nothing.
    if (!progressReaders(client.workflow).known(id)) {
      try {
        await handle.describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return void notFound(res, id);
        throw err;
      }
    }
    openEventStream(res, id);
    await streamProgress(req, res, handle, lastEventId(req));
  });

  router.get('/', async (req: Request, res: Response) => {
    const id = String(req.params.workflowId);
    const handle = client.workflow.getHandle(id);
    try {
      const d = await handle.describe();
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
        result,
        error,
      });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return void notFound(res, id);
      throw err;
    }
  });

  router.post('/cancel', guard, async (req: Request, res: Response) => {
    const id = String(req.params.workflowId);
    try {
      await client.workflow.getHandle(id).cancel();
      res.status(202).json({ success: true, message: 'cancellation requested; a VM the operation created will be removed' });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return void notFound(res, id);
      throw err;
    }
  });

  return router;
}
