import crypto from 'node:crypto';
import type { Response } from 'express';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { VM_OPERATION, failureOf, type Workflows } from '../contract';
import { HttpError } from './errors';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

export interface ReconcileRouteDeps {
  config: Config;
  client: Client;
}

type ReconcileResult = Awaited<ReturnType<Workflows['reconcileVms']>>;
interface Run {
  workflowId: string;
  done: Promise<ReconcileResult>;
}

/**
 * The reconciler on demand: `POST /api/reconcile` (admin) removes what abandoned installs
 * left behind and answers what it did, VM by VM; `GET /api/reconcile` answers what it
 * would do and changes nothing. Both run the reconcileVms workflow (its survey needs the
 * worker's cluster access and Temporal's view of each owner), so each leaves a history.
 *
 * A GET is a read anyone may make (an `<img src>` too), and a survey reads every VM's
 * config: so GETs share one preview. Requests arriving while one runs wait for it, and a
 * preview younger than RECONCILE_PREVIEW_MAX_AGE seconds is answered again (with `Age`)
 * instead of starting another; a POST starts afresh and drops the kept preview.
 */
function reconciler({ config, client }: ReconcileRouteDeps) {
  let running: Run | undefined;
  let kept: { run: Run; result: ReconcileResult; at: number } | undefined;

  function start(dryRun: boolean): Run {
    const workflowId = `reconcile-${dryRun ? 'dry-run-' : ''}${crypto.randomUUID()}`;
    const done = client.workflow
      .execute<Workflows['reconcileVms']>('reconcileVms', {
        workflowId,
        taskQueue: config.temporal.taskQueue,
        args: [{ dryRun }],
        typedSearchAttributes: [{ key: VM_OPERATION, value: 'reconcile' }],
        staticSummary: dryRun ? 'reconcile dry run (GET /api/reconcile)' : 'reconcile (POST /api/reconcile)',
      })
      .catch((err: unknown) => {
        if (!(err instanceof WorkflowFailedError)) throw err;
        // The survey could not read the cluster (a node down, ...): nothing was removed.
        throw new HttpError(502, `reconcile failed: ${failureOf(err.cause).message}`, { workflowId });
      });
    return { workflowId, done };
  }

  /** The preview in progress, or a new one; a finished one is kept for the next GETs. */
  function preview(): Run {
    if (running) return running;
    const run = start(true);
    running = run;
    run.done.then(
      (result) => {
        kept = { run, result, at: Date.now() };
      },
      () => undefined,
    ).finally(() => {
      if (running === run) running = undefined;
    });
    return run;
  }

  async function answer(res: Response, run: Run, age?: number) {
    // Named before waiting: a request that times out tells where to follow the run.
    res.set('X-Workflow-Id', run.workflowId);
    const result = await run.done;
    if (age !== undefined) res.set('Age', String(age));
    res.json({ success: true, workflowId: run.workflowId, ...result });
  }

  return {
    /** A GET: the kept preview while it is young enough, else the one running or a new one. */
    async dryRun(res: Response) {
      const ageMs = kept ? Date.now() - kept.at : Infinity;
      if (kept && ageMs < config.reconcilePreviewMaxAgeSec * 1000) {
        await answer(res, kept.run, Math.floor(ageMs / 1000));
        return;
      }
      await answer(res, preview());
    },
    /** A POST: starts afresh, and drops the kept preview. */
    async run(res: Response) {
      kept = undefined;
      await answer(res, start(false));
    },
  };
}

export const reconcileRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: reconciler,
  // A survey reads every VM's config, and a run also destroys what it found: minutes on a big cluster.
  routes: [
    {
      method: 'GET',
      path: '/reconcile',
      summary:
        'Dry run of the reconciler: what it would remove, VM by VM; changes nothing. Requests share one run: those arriving ' +
        'while one runs wait for it, and one younger than RECONCILE_PREVIEW_MAX_AGE seconds is answered again',
      answers: {
        200: { description: 'the plan', json: answers.reconcileAnswer, headers: { Age: 'seconds since a shared run finished, when it is answered again' } },
        502: err('the survey could not read the cluster'),
      },
      limits: { long: true },
      handle: (r, _req, res) => r.dryRun(res),
    },
    {
      method: 'POST',
      path: '/reconcile',
      summary: 'Remove the VMs that closed or vanished installs left behind',
      role: 'admin',
      answers: { 200: { description: 'what was done', json: answers.reconcileAnswer }, 502: err('the survey could not read the cluster; nothing was removed') },
      limits: { long: true },
      handle: (r, _req, res) => r.run(res),
    },
  ],
});
