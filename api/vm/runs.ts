import type { Client } from '@temporalio/client';
import type { Config } from '../../lib/config';
import { decodeListedMemo, listWorkflows } from '../../lib/temporal/workflowListing';
import { statusName, toDate } from '../../lib/temporal/workflowDescription';
import { WORKFLOW_TYPES } from '../../contract';
import { InvalidRequestError } from '../errors';
import { STARTED_BY } from '../startedBy';
import { parseVmid, vmidProblem } from './vmid';
import { tenantScope } from '../guard';
import { tenantOfListedRun } from '../tenancy';
import * as answers from '../openapi/responses';
import { err } from '../openapi/answer';
import { defineRoutes } from '../route';

/** Runs shown per VM: the latest ones; older ones are in the Temporal UI. */
const MAX_RUNS = 20;
const OWN_TYPES: ReadonlySet<string> = new Set(WORKFLOW_TYPES);

/**
 * `GET /api/vm/:id/runs`: the latest workflows that carry the VM's VmId search attribute
 * (its install, rebuilds, operations), newest first, from one visibility query, with the
 * token that started each (for a tenant's token, only its tenant's runs). Where a run's history is in the Temporal UI is for the client to
 * build from `temporalUi` (the UI's port and the namespace): the API does not know the
 * address its users reach the UI at.
 */
export const vmRunRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: { client: Client; config: Config }) => deps,
  routes: [
    {
      method: 'GET',
      path: '/vm/:id/runs',
      summary: "The VM's latest runs (install, rebuilds, operations) by its VmId search attribute, newest first, with who started each",
      answers: { 200: { description: 'up to 20 runs', json: answers.vmRuns }, 400: err('not a VMID') },
      handle: async ({ client, config }, req, res) => {
        const vmid = parseVmid(String(req.params.id));
        if (vmid === undefined) throw new InvalidRequestError(vmidProblem(String(req.params.id)));
        // A tenant's token sees the runs its tenant's tokens started (a rebuild's install by
        // its rebuild's): a VMID outlives its VMs, and the runs of another tenant's VM at it
        // (before or now) are not this tenant's to read.
        const scope = tenantScope(res);
        const runs = [];
        for await (const wf of listWorkflows(client, `VmId = ${vmid}`, MAX_RUNS)) {
          const type = wf.type?.name ?? '';
          if (!OWN_TYPES.has(type) || wf.taskQueue !== config.temporal.taskQueue) continue;
          const decoded = await decodeListedMemo(client, wf);
          const memo = 'memo' in decoded ? decoded.memo : undefined;
          const startedBy = memo?.[STARTED_BY];
          if (scope !== undefined && (await tenantOfListedRun({ client, tokens: config.apiTokens }, wf, memo)) !== scope) continue;
          runs.push({
            workflowId: wf.execution?.workflowId ?? '',
            runId: wf.execution?.runId ?? '',
            type,
            status: statusName(wf.status),
            startTime: toDate(wf.startTime),
            closeTime: toDate(wf.closeTime),
            ...(typeof startedBy === 'string' ? { startedBy } : {}),
          });
          if (runs.length >= MAX_RUNS) break;
        }
        res.json({ success: true, vmid, runs, temporalUi: { port: config.temporal.uiPort, namespace: config.temporal.namespace } });
      },
    },
  ],
});
