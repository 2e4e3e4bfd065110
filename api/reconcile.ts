import crypto from 'node:crypto';
import { Router, Request, Response } from 'express';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { VM_OPERATION, type Workflows } from '../contract';
import { requireMutationAccess } from './guard';
import { HttpError } from './errors';
import { limitsFor } from './limits';

export interface ReconcileRouteDeps {
  config: Config;
  client: Client;
}

/**
 * The reconciler on demand: `POST /api/reconcile` removes what abandoned installs left
 * behind and answers what it did, VM by VM; `GET /api/reconcile` answers what it would do
 * and changes nothing. Both run the reconcileVms workflow (its survey needs the worker's
 * cluster access and Temporal's view of each owner), so each leaves a history to read.
 */
export function reconcileRoutes({ config, client }: ReconcileRouteDeps): Router {
  const router = Router();

  async function run(res: Response, dryRun: boolean) {
    const workflowId = `reconcile-${dryRun ? 'dry-run-' : ''}${crypto.randomUUID()}`;
    // Named before waiting: a request that times out tells where to follow the run.
    res.set('X-Workflow-Id', workflowId);
    try {
      const result = await client.workflow.execute<Workflows['reconcileVms']>('reconcileVms', {
        workflowId,
        taskQueue: config.temporal.taskQueue,
        args: [{ dryRun }],
        typedSearchAttributes: [{ key: VM_OPERATION, value: 'reconcile' }],
        staticSummary: dryRun ? 'reconcile dry run (GET /api/reconcile)' : 'reconcile (POST /api/reconcile)',
      });
      res.json({ success: true, workflowId, ...result });
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      // The survey could not read the cluster (a node down, ...): nothing was removed.
      let cause: unknown = err;
      while (cause instanceof Error && cause.cause) cause = cause.cause;
      throw new HttpError(502, `reconcile failed: ${cause instanceof Error ? cause.message : String(cause)}`, { workflowId });
    }
  }

  // A survey reads every VM's config, and a run also destroys what it found: minutes on a big cluster.
  router.get('/reconcile', ...limitsFor({ long: true }), (_req: Request, res: Response) => run(res, true));
  router.post('/reconcile', ...limitsFor({ long: true }), requireMutationAccess(config), (_req: Request, res: Response) => run(res, false));
  return router;
}
