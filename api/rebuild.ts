import { rebuildBodySchema, vmName } from '../contract';
import { Router, Request, Response } from 'express';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/observability/log';
import type { ProxmoxCluster } from '../lib/proxmox';
import { openEventStream, streamProgress, type Streams } from './sse';
import { requireRole, tenantScope } from './guard';
import { vmService } from './vm/service';
import { startedByMemo } from './startedBy';
import { startVmOperation } from './vm/operation';
import { checkRebuildTarget } from './rebuildCheck';
import { parseVmid, vmidProblem } from './vm/vmid';
import { InvalidRequestError, parseInput } from './errors';
import { limitsFor } from './limits';

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
export function rebuildRoutes({ config, client, proxmox, streams, logger }: RebuildRouteDeps): Router {
  const router = Router();
  const vms = vmService({ config, client, proxmox, logger });

  router.post('/vm/:id/rebuild', ...limitsFor({ stream: true }, streams.limiter), requireRole(config, 'operate'), async (req: Request, res: Response) => {
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
  });

  return router;
}
