import { installBodySchema, type InstallInput, type InstallSpec, vmSearchAttributes, type Workflows } from '../contract';
import crypto from 'node:crypto';
import type { Request } from 'express';
import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../lib/config';
import { toInstallSpec } from './installRequest';
import { InvalidRequestError } from './errors';
import { openEventStream, streamProgress, type Streams } from './sse';
import { tenantOf } from './guard';
import { checkLeaseQuota } from './leaseQuota';
import { startedByMemo } from './startedBy';
import type { ProxmoxCluster } from '../lib/proxmox';
import { diskTooBig } from '../lib/vm/diskSpace';
import { disksProblem, poolProblem, storageProblem } from '../lib/vm/placement';
import { checkSameRequest } from './idempotency';
import { prefersAsync } from './prefer';
import * as answers from './openapi/responses';
import { err, stream } from './openapi/answer';
import { defineRoutes } from './route';

export interface InstallRouteDeps {
  streams: Streams;
  config: Config;
  client: Client;
  knownNodes: string[];
  /** The main node reads the target storage's free space (and a requested bridge) before anything starts. */
  proxmox?: ProxmoxCluster;
}

/**
 * A disk larger than ASSIGN_STORAGE's free space, as the 400 message; undefined when it fits
 * or the storage cannot be read now (the workflow's storage step checks again and says why).
 */
async function diskProblem(config: Config, proxmox: ProxmoxCluster | undefined, diskGb: number): Promise<string | undefined> {
  const main = proxmox?.node(config.mainNode);
  if (!main) return undefined;
  const storage = await main
    .storageStatus({ storage: config.storage })
    .then((list) => list.find((s) => s.name === config.storage))
    .catch(() => undefined);
  return storage ? diskTooBig(diskGb, storage) : undefined;
}

/**
 * The pool and the storage an install names, checked on the main node before anything
 * starts (lib/vm/placement.ts), as the 400 message naming the field. A Proxmox that cannot
 * be read now lets the install start: its create and storage steps check again.
 */
async function placementProblem(config: Config, proxmox: ProxmoxCluster | undefined, spec: InstallSpec): Promise<string | undefined> {
  const main = proxmox?.node(config.mainNode);
  if (!main) return undefined;
  const pool = spec.pool === undefined ? undefined : await poolProblem(main, spec.pool).catch(() => undefined);
  if (pool) return `pool: ${pool}`;
  const storage = spec.storage === undefined ? undefined : await storageProblem(main, spec.storage, spec.diskGb).catch(() => undefined);
  if (storage) return `storage: ${storage}`;
  return disksProblem(main, spec, config.storage).catch(() => undefined);
}

/**
 * A `bridge` the node the VM starts on does not have, as the 400 message. Proxmox's create
 * does not check it and the start would fail (BridgeNotFoundError, after the image is
 * copied); its network configuration says so now. Undefined when the request names no
 * bridge (VM_BRIDGE is the operator's, checked at start as before), the bridge is there, or
 * the nodes cannot be asked now (the start checks again). In API mode the list is what the
 * token may see: Proxmox leaves out a bridge the token has neither SDN.Audit nor SDN.Use on
 * (pve-manager PVE/API2/Network.pm `index`), and the create would refuse it for want of
 * SDN.Use, so the message names that privilege as well.
 */
async function bridgeProblem(config: Config, proxmox: ProxmoxCluster | undefined, bridge: string | undefined, node: string | undefined): Promise<string | undefined> {
  const main = proxmox?.node(config.mainNode);
  if (!main || bridge === undefined) return undefined;
  const target = node ?? config.mainNode;
  const bridges = await main.bridges(target).catch(() => undefined);
  if (!bridges || bridges.includes(bridge)) return undefined;
  const listed = bridges.length ? bridges.join(', ') : 'none';
  if (proxmox?.mode === 'api') {
    return `bridge: node '${target}' lists no bridge '${bridge}' to the Proxmox token (it lists ${listed}): the node lacks it, or the token lacks SDN.Use on /sdn/zones/localnetwork/${bridge}, without which Proxmox neither lists the bridge nor attaches a VM to it`;
  }
  return `bridge: node '${target}' has no bridge '${bridge}' (it has ${listed})`;
}

/** A client-chosen key becomes a stable workflow id without trusting its characters. */
function workflowIdFor(req: Request): string {
  const key = req.get('Idempotency-Key');
  if (!key) return `install-${crypto.randomUUID()}`;
  return `install-key-${crypto.createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

export const installRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: InstallRouteDeps) => deps,
  routes: [
    {
      method: 'POST',
      path: '/vm/install',
      summary: 'Install a VM from an official cloud image',
      role: 'operate',
      body: installBodySchema,
      headers: ['Idempotency-Key', 'Prefer'],
      answers: {
        200: stream('the install, step by step, until `event: close`'),
        202: {
          description: 'with `Prefer: respond-async`: started; poll `Location`',
          json: answers.installAccepted,
          headers: { Location: 'the status resource', 'Preference-Applied': '`respond-async`', 'X-Workflow-Id': 'the workflow id' },
        },
        400: err('a field is invalid (named in the message), or `version` is not one of the OS; nothing was started'),
        422: err('the Idempotency-Key was used with another request, or by an install this deployment cannot decode'),
        429: err(
          "this client already holds SSE_MAX_PER_CLIENT streams, or the token holds the leases its address pool allows (`maxLeasesPerHolder`, named in the message with the pool); nothing was started",
        ),
        503: err('the server holds SSE_MAX_TOTAL streams'),
      },
      limits: { stream: { unless: prefersAsync } },
      handle: async ({ config, client, knownNodes, proxmox, streams }, req, res) => {
        const { spec, secrets } = toInstallSpec(req.body, config, knownNodes, tenantOf(res));
        // No main node: the worker's MAIN_NODE decides where the VM is created (one source, even
        // when this API is configured with another).
        const input: InstallInput = { spec, secrets };
        const noRoom = spec.storage === undefined ? await diskProblem(config, proxmox, spec.diskGb) : undefined;
        if (noRoom) throw new InvalidRequestError(noRoom);
        const misplaced = await placementProblem(config, proxmox, spec);
        if (misplaced) throw new InvalidRequestError(misplaced);
        const noBridge = await bridgeProblem(config, proxmox, spec.bridge, spec.node);
        if (noBridge) throw new InvalidRequestError(noBridge);
        const workflowId = workflowIdFor(req);
        await checkLeaseQuota(config, client, spec.addressPool, tenantOf(res), workflowId);
        let handle;
        try {
          handle = await client.workflow.start<Workflows['installVm']>('installVm', {
            taskQueue: config.temporal.taskQueue,
            workflowId,
            args: [input],
            workflowIdConflictPolicy: 'USE_EXISTING',
            // A finished install under the same Idempotency-Key is attached to, not repeated.
            workflowIdReusePolicy: 'REJECT_DUPLICATE',
            typedSearchAttributes: vmSearchAttributes('install', spec),
            memo: { request: spec, ...startedByMemo(res) },
            staticSummary: `install ${spec.os} ${spec.version}${spec.name ? ` "${spec.name}"` : ''}${spec.vmid ? ` as VM ${spec.vmid}` : ''}${spec.node ? ` on ${spec.node}` : ''}`,
          });
        } catch (err) {
          if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
          handle = client.workflow.getHandle(workflowId);
        }
        const key = req.get('Idempotency-Key');
        // Another body under the same key: IdempotencyKeyReused, a 422 naming the key.
        if (key) await checkSameRequest(client, key, workflowId, input);
        if (prefersAsync(req)) {
          // Automation polls the status resource instead of holding a stream (and a stream slot).
          const location = `${req.baseUrl}/vm/install/${encodeURIComponent(workflowId)}`;
          res
            .status(202)
            .set({ Location: location, 'Preference-Applied': 'respond-async', 'X-Workflow-Id': workflowId })
            .json({ success: true, workflowId, status: location });
          return;
        }
        openEventStream(res, workflowId, streams.limiter);
        await streamProgress(streams.readers, req, res, handle, 0);
      },
    },
  ],
});
