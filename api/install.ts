import crypto from 'node:crypto';
import { Router, Request, Response } from 'express';
import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import { installVm } from '../workflows';
import type { InstallInput } from '../workflows/install';
import { VM_ID, VM_NAME, VM_NODE, VM_OPERATION, VM_OS } from '../lib/temporal/searchAttributes';
import { InvalidRequestError, toInstallSpec } from './installRequest';
import { openEventStream, streamProgress } from './sse';
import { requireMutationAccess } from './guard';

export interface InstallRouteDeps {
  config: Config;
  client: Client;
  knownNodes: string[];
}

/** A client-chosen key becomes a stable workflow id without trusting its characters. */
function workflowIdFor(req: Request): string {
  const key = req.get('Idempotency-Key');
  if (!key) return `install-${crypto.randomUUID()}`;
  return `install-key-${crypto.createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

export function installRoutes({ config, client, knownNodes }: InstallRouteDeps): Router {
  const router = Router();
  const guard = requireMutationAccess(config);

  router.post('/vm/install', guard, async (req: Request, res: Response) => {
    let input: InstallInput;
    try {
      const { spec, secrets } = toInstallSpec(req.body, config, knownNodes);
      input = { spec, secrets, mainNode: config.mainNode };
    } catch (err) {
      if (err instanceof InvalidRequestError) {
        res.status(400).json({ success: false, message: `please check your input: ${err.message}` });
        return;
      }
      throw err;
    }
    const { spec } = input;
    const workflowId = workflowIdFor(req);
    let handle;
    try {
      handle = await client.workflow.start(installVm, {
        taskQueue: config.temporal.taskQueue,
        workflowId,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        // A finished install under the same Idempotency-Key is attached to, not repeated.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: VM_OPERATION, value: 'install' },
          { key: VM_OS, value: `${spec.os}-${spec.version}` },
          { key: VM_NODE, value: spec.node ?? config.mainNode },
          ...(spec.vmid !== undefined ? [{ key: VM_ID, value: spec.vmid }] : []),
          // The Proxmox name, `<name>-<vmid>`; known up front only with an explicit id.
          ...(spec.vmid !== undefined ? [{ key: VM_NAME, value: `${spec.name ?? spec.vmid}-${spec.vmid}` }] : []),
        ],
        memo: { request: spec },
        staticSummary: `install ${spec.os} ${spec.version}${spec.name ? ` "${spec.name}"` : ''}${spec.vmid ? ` as VM ${spec.vmid}` : ''} on ${spec.node ?? config.mainNode}`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      handle = client.workflow.getHandle(workflowId);
    }
    openEventStream(res, workflowId);
    await streamProgress(req, res, handle, 0);
  });

  return router;
}
