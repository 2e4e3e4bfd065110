import { rebuildBodySchema, vmName } from '../contract';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/observability/log';
import type { ProxmoxCluster } from '../lib/proxmox';
import { openEventStream, streamProgress, type Streams } from './sse';
import { tenantScope } from './guard';
import { vmService } from './vm/service';
import { startedByMemo } from './startedBy';
import { startVmOperation } from './vm/operation';
import { checkRebuildTarget } from './rebuildCheck';
import { parseVmid, vmidProblem } from './vm/vmid';
import { InvalidRequestError, parseInput } from './errors';
import { err, NO_SUCH_VM, stream } from './openapi/answer';
import { defineRoutes } from './route';

export interface RebuildRouteDeps {
  streams: Streams;
  config: Config;
  client: Client;
  proxmox: ProxmoxCluster;
  logger: Logger;
}

/**
 * `POST /api/vm/:id/rebuild`: re-creates a VM QemuRun installed from the spec in its
 * description, streamed like an install. A disabled VM gets 400, a missing one 404, a VM
 * the product did not install 409; another operation running on the VM gets 409 naming it.
 * In all of these nothing is started and nothing is touched.
 */
export const rebuildRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: RebuildRouteDeps) => ({ ...deps, vms: vmService(deps) }),
  routes: [
    {
      method: 'POST',
      path: '/vm/:id/rebuild',
      summary: 'Re-create a VM from the spec it records',
      role: 'operate',
      body: rebuildBodySchema,
      answers: { 200: stream('the rebuild, until `event: close`'), 400: err('the body is invalid'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or it records no spec') },
      limits: { stream: true },
      handle: async ({ config, client, proxmox, streams, logger, vms }, req, res) => {
        const vmid = parseVmid(String(req.params.id));
        if (vmid === undefined) throw new InvalidRequestError(vmidProblem(String(req.params.id)));
        const body = parseInput(rebuildBodySchema, req.body);
        await vms.changeable(vmid, tenantScope(res));
        const target = await checkRebuildTarget({ config, proxmox, client }, { vmid });
        // As for every command on an existing VM: one that cannot be told from a later VM at its VMID gets no command.
        if (target.exists) vms.requireInstance({ vmid, instance: target.instance });
        const name = vmName(target.spec.name, vmid);
        const handle = await startVmOperation({
          client,
          taskQueue: config.temporal.taskQueue,
          workflow: 'vmRebuild',
          args: [{ vmid, passwd: body.passwd }],
          vmid,
          node: target.spec.node ?? target.mainNode,
          operation: 'rebuild',
          summary: `rebuild VM ${vmid} (${name}): ${target.spec.os} ${target.spec.version}`,
          memo: startedByMemo(res),
          logger,
          instance: target.exists ? target.instance : undefined,
        });
        openEventStream(res, handle.workflowId, streams.limiter);
        await streamProgress(streams.readers, req, res, handle, 0);
      },
    },
  ],
});
