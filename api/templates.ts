import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { readTemplates } from '../lib/vm/templates';
import { storageProblem } from '../lib/vm/placement';
import { type BuildTemplateInput, checkInput, InvalidInputError, TEMPLATE_DISK_GB, templateKey, templateScheduleId, templateWorkflowId, workflowInputs, type Workflows } from '../contract';
import { HttpError } from './errors';
import { startedByMemo } from './startedBy';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

export interface TemplateRouteDeps {
  config: Config;
  client: Client;
  proxmox: ProxmoxCluster;
}

/**
 * Golden templates. `GET /templates`: the cluster's QemuRun templates with their
 * state, and the targets TEMPLATES refreshes on TEMPLATE_SCHEDULE. `POST /templates`
 * (`{ "os", "version", "storage"? }`): builds one now, as the buildTemplate workflow; a build
 * of the same target that is running already is answered instead of starting another.
 */
export const templateRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: TemplateRouteDeps) => deps,
  routes: [
    {
      method: 'GET',
      path: '/templates',
      summary: 'Golden templates and their refresh schedules',
      answers: { 200: { description: "the cluster's QemuRun templates, newest first, and the TEMPLATES schedules", json: answers.templates }, 502: err("the cluster's templates could not be read") },
      handle: async ({ config, proxmox }, _req, res) => {
        const templates = await readTemplates(config, proxmox).catch((err: Error) => err);
        if (templates instanceof Error) throw new HttpError(502, `could not read the cluster's templates: ${templates.message}`);
        const schedules = config.templates.targets.map((t) => ({ target: templateKey(t), scheduleId: templateScheduleId(t), cron: config.templates.schedule }));
        res.json({ count: templates.length, templates, schedules, maxAgeSec: config.templates.maxAgeMs / 1000 });
      },
    },
    {
      method: 'POST',
      path: '/templates',
      summary: "Build an OS version's golden template now",
      role: 'operate',
      body: workflowInputs.buildTemplate,
      answers: { 202: { description: 'the build started (or one of the same target runs already)', json: answers.templateBuild }, 400: err('a bad os, version or storage') },
      handle: async ({ config, client, proxmox }, req, res) => {
        let target: BuildTemplateInput;
        try {
          target = checkInput(workflowInputs.buildTemplate, req.body, 'POST /api/templates') as BuildTemplateInput;
        } catch (err) {
          if (err instanceof InvalidInputError) throw new HttpError(400, err.message.replace(/^invalid input for POST \/api\/templates: /, ''));
          throw err;
        }
        // As an install's `storage`: a build on a storage the main node lacks, or that takes no
        // disks, would fail only after a VMID, an address and the image were taken. A Proxmox that
        // cannot be read now lets the build start: its storage step checks again.
        const main = proxmox.node(config.mainNode);
        if (target.storage !== undefined && main) {
          const problem = await storageProblem(main, target.storage, TEMPLATE_DISK_GB).catch(() => undefined);
          if (problem) throw new HttpError(400, `storage: ${problem}`);
        }
        const workflowId = templateWorkflowId(target);
        let started = true;
        try {
          await client.workflow.start<Workflows['buildTemplate']>('buildTemplate', {
            taskQueue: config.temporal.taskQueue,
            workflowId,
            args: [target],
            // One build per target at a time; a finished one may run again.
            workflowIdConflictPolicy: 'FAIL',
            workflowIdReusePolicy: 'ALLOW_DUPLICATE',
            memo: startedByMemo(res),
            staticSummary: `build the ${target.os} ${target.version} template${target.storage !== undefined ? ` on ${target.storage}` : ''} (POST /api/templates)`,
          });
        } catch (err) {
          if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
          started = false;
        }
        const base = `${req.baseUrl}/workflows/${encodeURIComponent(workflowId)}`;
        res
          .status(202)
          .set({ Location: base, 'X-Workflow-Id': workflowId })
          .json({ success: true, workflowId, started, status: base, events: `${base}/events` });
      },
    },
  ],
});
