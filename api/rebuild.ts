import { vmName } from '../contract';
import { Router, Request, Response } from 'express';
import { z } from 'zod';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import { describeIssues, installBodySchema } from './installRequest';
import { openEventStream, streamProgress } from './sse';
import { requireMutationAccess } from './guard';
import { startVmOperation, VmBusyError } from './vmOperation';
import { checkRebuildTarget, parseVmid, RebuildRefused, vmidProblem } from './rebuildCheck';

export interface RebuildRouteDeps {
  config: Config;
  client: Client;
  executors: Record<string, NodeExecutor>;
}

/** The spec marker holds no secrets: a new cloud-init password comes with the request; without one the VM keeps its own. */
export const rebuildBodySchema = z.object({ passwd: installBodySchema.shape.passwd }).strict();

export function badInput(res: Response, message: string): void {
  res.status(400).json({ success: false, message: `please check your input: ${message}` });
}

/**
 * `POST /api/vm/:id/rebuild`: re-creates a VM QemuRun installed from the spec in its
 * description, streamed like an install. A disabled VM gets 400, a missing one 404, a VM
 * the product did not install 409; another operation running on the VM gets 409 naming it.
 * In all of these nothing is started and nothing is touched.
 */
export function rebuildRoutes({ config, client, executors }: RebuildRouteDeps): Router {
  const router = Router();

  router.post('/vm/:id/rebuild', requireMutationAccess(config), async (req: Request, res: Response) => {
    const vmid = parseVmid(String(req.params.id));
    if (vmid === undefined) return badInput(res, vmidProblem(String(req.params.id)));
    const body = rebuildBodySchema.safeParse(req.body ?? {}, { reportInput: true });
    if (!body.success) return badInput(res, describeIssues(body.error, req.body ?? {}));

    let target;
    try {
      target = await checkRebuildTarget({ config, executors, client }, { vmid });
    } catch (err) {
      if (!(err instanceof RebuildRefused)) throw err;
      res.status(err.status).json({ success: false, message: err.message });
      return;
    }
    const name = vmName(target.spec.name, vmid);
    let handle;
    try {
      handle = await startVmOperation({
        client,
        taskQueue: config.temporal.taskQueue,
        workflow: 'vmRebuild',
        args: [{ vmid, passwd: body.data.passwd }],
        vmid,
        node: target.spec.node ?? target.mainNode,
        operation: 'rebuild',
        summary: `rebuild VM ${vmid} (${name}): ${target.spec.os} ${target.spec.version}`,
      });
    } catch (err) {
      if (!(err instanceof VmBusyError)) throw err;
      res.status(409).json({ success: false, message: err.message, workflowId: err.workflowId, operation: err.operation });
      return;
    }
    openEventStream(res, handle.workflowId);
    await streamProgress(req, res, handle, 0);
  });

  return router;
}
