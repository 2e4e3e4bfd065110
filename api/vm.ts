import {
  DEFAULT_USER,
  isManaged,
  notManagedMessage,
  OS_VERSIONS,
  OsName,
  ownerOf,
  type WorkflowType,
} from '../contract';
import { Router, Request, Response, RequestHandler } from 'express';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { z } from 'zod';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import { ProxmoxNode } from '../lib/proxmox/client';
import { readDisabledVmids } from '../lib/stateFiles';
import { vmIp } from '../lib/network';
import { clientIp, requireMutationAccess } from './guard';
import { openEventStream, streamProgress } from './sse';
import { streamOpened } from './limits';
import { VmBusyError, httpFailure, startVmOperation } from './vmOperation';
import { describeIssues } from './issues';
import { parseVmid, vmidProblem } from './rebuildCheck';

/**
 * `/vm/:id/...`: the state of one VM, and the operations on it. Every check that can fail
 * fast runs here, before a workflow starts (SPEC table), in this order: a malformed VMID,
 * a disabled VMID, a malformed body → 400; a VMID the cluster does not know → 404; a VM
 * outside the managed set (no owner marker, unless MANAGE_ALL_VMS) → 409; the
 * wrong power state → 400 with the seed's "VM is running" / "VM is not running"; another
 * operation or an install holding the VM → 409. Then the operation runs as a short workflow; SSE
 * operations stream it, the others answer `ok` when it has finished.
 */

export interface VmRouteDeps {
  config: Config;
  client: Client;
  executors: Record<string, NodeExecutor>;
  knownNodes: string[];
}

/** What the API knows about a VM once its preconditions passed. */
export interface VmFacts {
  vmid: number;
  node: string;
  /** `qm status` on its node: running, stopped, or a QMP state such as paused. */
  state: string;
  running: boolean;
  tags: string[];
}

/** What the VM's config says about it that the managed set needs. */
type VmNotes = { description?: string; name?: string };

/** An answer decided before any workflow starts. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const invalid = (message: string) => new HttpError(400, `please check your input: ${message}`);

const cpuBody = z
  .object({ cpu: z.number({ error: 'must be an integer from 1 to 32' }).int('must be an integer from 1 to 32').min(1, 'must be at least 1').max(32, 'must be at most 32') })
  .strict();
const memoryBody = z
  .object({
    memory: z
      .number({ error: 'must be an integer number of MB from 512 to 32768' })
      .int('must be an integer number of MB from 512 to 32768')
      .min(512, 'must be at least 512 (MB)')
      .max(32768, 'must be at most 32768 (MB)'),
  })
  .strict();
/** The increment a disk grows by, as the seed took it: `<n>G`. */
const MAX_DISK_INCREMENT_GB = 4096;
const diskBody = z
  .object({
    disk: z.string({ error: 'must be a string like "16G"' }).superRefine((v, ctx) => {
      const problem = !/^\d{1,9}G$/.test(v)
        ? 'must be a whole number of GiB followed by G, like "16G"'
        : Number(v.slice(0, -1)) < 1
          ? 'must grow the disk by at least 1G'
          : Number(v.slice(0, -1)) > MAX_DISK_INCREMENT_GB
            ? `must be at most ${MAX_DISK_INCREMENT_GB}G at a time`
            : undefined;
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  })
  .strict();
/** Adoption takes no options: an empty body or `{}`. */
const adoptBody = z.object({}).strict();
const nodeBody = z.object({ node: z.string({ error: 'must be the name of a cluster node' }).min(1, 'must be the name of a cluster node') }).strict();

function parseBody<T>(schema: z.ZodType<T>, raw: unknown): T {
  const body = raw ?? {};
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalid(describeIssues(parsed.error, body));
  return parsed.data;
}

export function vmRoutes({ config, client, executors, knownNodes }: VmRouteDeps): Router {
  const router = Router();
  const guard = requireMutationAccess(config);
  const onNode = (node: string): ProxmoxNode => {
    const exec = executors[node];
    if (!exec) throw new HttpError(502, `VM is on node '${node}', which is not configured (NODE_${node})`);
    return new ProxmoxNode(exec);
  };

  function vmidOf(req: Request): number {
    const raw = String(req.params.id);
    const vmid = parseVmid(raw);
    if (vmid === undefined) throw invalid(vmidProblem(raw));
    return vmid;
  }

  /** Where the VM is and whether it runs: one cluster query, then `qm status` on its node. */
  async function lookUp(vmid: number, opts: { config?: boolean } = {}): Promise<VmFacts & { conf?: VmNotes }> {
    let resources;
    try {
      resources = await onNode(config.mainNode).clusterResources('vm');
    } catch (err) {
      throw new HttpError(502, `could not read the cluster: ${(err as Error).message}`);
    }
    const vm = resources.find((r) => r.vmid === vmid && r.type === 'qemu');
    if (!vm) throw new HttpError(404, `VM ${vmid} does not exist`);
    const readState = async () => {
      try {
        return await onNode(vm.node).status(vmid);
      } catch (err) {
        if (err instanceof HttpError) throw err;
        throw new HttpError(502, `could not read the state of VM ${vmid} on ${vm.node}: ${(err as Error).message}`);
      }
    };
    // Side by side: each is a command on the node, and the answer has a deadline.
    const [state, conf] = await Promise.all([readState(), opts.config ? notesOf(vm.node, vmid) : undefined]);
    return { vmid, node: vm.node, state, running: state !== 'stopped', tags: vm.tags, conf };
  }

  /** The disabled list locks a VMID out of every mutating endpoint, whatever the body. */
  function refuseDisabled(vmid: number): void {
    if (readDisabledVmids(config.dataDir).has(vmid)) {
      throw new HttpError(400, `VM ${vmid} is on the disabled list and cannot be controlled through the API`);
    }
  }

  /** The VM's description, from `qm config` on its node. */
  async function notesOf(node: string, vmid: number): Promise<VmNotes> {
    try {
      return await onNode(node).config(vmid);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(502, `could not read the config of VM ${vmid} on ${node}: ${(err as Error).message}`);
    }
  }

  /** The managed set (docs/security.md): unless MANAGE_ALL_VMS, only VMs with the owner marker. */
  function refuseUnmanaged(vm: VmFacts & { conf?: VmNotes }): void {
    if (config.manageAllVms) return;
    if (!isManaged(vm.conf?.description)) throw new HttpError(409, notManagedMessage(vm.vmid, vm.conf?.name), { type: 'NotManagedError' });
  }

  /** The VM exists, is in the managed set, and is in the power state the operation needs. */
  async function preconditions(vmid: number, needs: 'running' | 'stopped'): Promise<VmFacts> {
    const vm = await lookUp(vmid, { config: !config.manageAllVms });
    refuseUnmanaged(vm);
    if (needs === 'stopped' && vm.running) throw new HttpError(400, 'VM is running', { state: vm.state });
    if (needs === 'running' && !vm.running) throw new HttpError(400, 'VM is not running', { state: vm.state });
    return vm;
  }

  /** The OS default user SSH readiness logs in as, from the VM's OS tag (as the seed did). */
  async function sshUser(vm: VmFacts): Promise<string> {
    const os = vm.tags.find((t): t is OsName => Object.hasOwn(OS_VERSIONS, t));
    if (os) return DEFAULT_USER[os];
    const conf = await onNode(vm.node).config(vm.vmid).catch(() => undefined);
    return conf?.entries.ciuser ?? 'root';
  }

  /** Wraps a handler: HttpError and a busy VM become JSON answers. */
  const handle =
    (fn: (req: Request, res: Response) => Promise<void>): RequestHandler =>
    async (req, res) => {
      try {
        await fn(req, res);
      } catch (err) {
        if (res.headersSent) {
          res.end();
          return;
        }
        if (err instanceof HttpError) {
          res.status(err.status).json({ success: false, message: err.message, ...err.extra });
          return;
        }
        if (err instanceof VmBusyError) {
          res.status(409).json({ success: false, message: err.message, workflowId: err.workflowId, operation: err.operation });
          return;
        }
        throw err;
      }
    };

  interface Operation {
    workflow: WorkflowType;
    args: unknown[];
    operation: string;
    summary: string;
    node?: string;
  }

  function start(vm: VmFacts, op: Operation): Promise<WorkflowHandle> {
    return startVmOperation({
      client,
      taskQueue: config.temporal.taskQueue,
      workflow: op.workflow,
      args: op.args,
      vmid: vm.vmid,
      node: op.node ?? vm.node,
      operation: op.operation,
      summary: op.summary,
    });
  }

  /** Waits for the operation's workflow; on failure answers its error as JSON and says false. */
  async function finished(res: Response, h: WorkflowHandle): Promise<boolean> {
    try {
      await h.result();
      return true;
    } catch (err) {
      const f = httpFailure(err);
      res.status(f.status).json({ success: false, message: f.message, type: f.type, workflowId: h.workflowId });
      return false;
    }
  }

  /** An operation answered with `ok` once its workflow has finished. */
  function plain(path: string, needs: 'running' | 'stopped', build: (vm: VmFacts, body: unknown) => Operation, schema?: z.ZodType) {
    router.post(
      `/vm/:id/${path}`,
      guard,
      handle(async (req, res) => {
        const vmid = vmidOf(req);
        refuseDisabled(vmid);
        const body = schema ? parseBody(schema, req.body) : undefined;
        const vm = await preconditions(vmid, needs);
        const h = await start(vm, build(vm, body));
        res.set('X-Workflow-Id', h.workflowId);
        // Started: the answer waits for the workflow however long a shutdown takes, so the
        // request deadline stops here, and the wait counts against the client's open streams.
        streamOpened(res);
        if (await finished(res, h)) res.type('text/plain').send('ok');
      }),
    );
  }

  /** An operation answered with its SSE stream, like an install. */
  function streamed(
    path: string,
    needs: 'running' | 'stopped',
    build: (vm: VmFacts, body: unknown) => Promise<Operation> | Operation,
    schema?: z.ZodType,
  ) {
    router.post(
      `/vm/:id/${path}`,
      guard,
      handle(async (req, res) => {
        const vmid = vmidOf(req);
        refuseDisabled(vmid);
        const body = schema ? parseBody(schema, req.body) : undefined;
        const vm = await preconditions(vmid, needs);
        const h = await start(vm, await build(vm, body));
        openEventStream(res, h.workflowId);
        await streamProgress(req, res, h, 0);
      }),
    );
  }

  /**
   * Adoption: a VM made elsewhere joins the managed set on purpose. Runs as the workflow
   * `vmAdopt` under `vm-<vmid>` (so it is in history, and never runs beside another operation on the VM), and
   * answers once the marker is written.
   */
  router.post(
    '/vm/:id/adopt',
    guard,
    handle(async (req, res) => {
      const vmid = vmidOf(req);
      refuseDisabled(vmid);
      parseBody(adoptBody, req.body);
      const vm = await lookUp(vmid, { config: true });
      const conf = vm.conf ?? {};
      const owner = ownerOf(conf.description);
      if (owner !== undefined) {
        throw new HttpError(409, `VM ${vmid} is already managed by QemuRun (qemurun-owner=${owner}); there is nothing to adopt`, {
          type: 'AlreadyManagedError',
        });
      }
      const h = await start(vm, {
        workflow: 'vmAdopt',
        args: [{ vmid, by: clientIp(req, config.trustedProxies) }],
        operation: 'adopt',
        summary: `adopt VM ${vmid}${conf.name ? ` (${conf.name})` : ''} on ${vm.node} into the managed set`,
      });
      res.set('X-Workflow-Id', h.workflowId);
      if (!(await finished(res, h))) return;
      const adopted = await notesOf(vm.node, vmid).catch(() => undefined);
      res.json({ success: true, message: `VM ${vmid} is now managed by QemuRun`, vmid, owner: ownerOf(adopted?.description), workflowId: h.workflowId });
    }),
  );

  router.get(
    '/vm/:id/status',
    handle(async (req, res) => {
      const vm = await lookUp(vmidOf(req));
      res.type('text/plain').send(vm.state);
    }),
  );

  streamed('start', 'stopped', async (vm) => ({
    workflow: 'vmStart',
    args: [{ vmid: vm.vmid, ip: vmIp(config.gateway, vm.vmid), user: await sshUser(vm) }],
    operation: 'start',
    summary: `start VM ${vm.vmid} on ${vm.node}`,
  }));

  streamed('reboot', 'running', async (vm) => ({
    workflow: 'vmReboot',
    args: [{ vmid: vm.vmid, ip: vmIp(config.gateway, vm.vmid), user: await sshUser(vm) }],
    operation: 'reboot',
    summary: `reboot VM ${vm.vmid} on ${vm.node}`,
  }));

  streamed(
    'set/node',
    'stopped',
    (vm, body) => {
      const { node } = body as z.infer<typeof nodeBody>;
      if (!knownNodes.includes(node)) throw invalid(`node: must be one of the cluster's nodes (${knownNodes.join(', ')})`);
      if (node === vm.node) throw new HttpError(400, `VM ${vm.vmid} is already on node ${node}`);
      return {
        workflow: 'vmMigrate',
        args: [{ vmid: vm.vmid, from: vm.node, target: node }],
        operation: 'migrate',
        summary: `migrate VM ${vm.vmid} from ${vm.node} to ${node}`,
        node,
      };
    },
    nodeBody,
  );

  plain('shutdown', 'running', (vm) => ({
    workflow: 'vmShutdown',
    args: [{ vmid: vm.vmid }],
    operation: 'shutdown',
    summary: `shut down VM ${vm.vmid} on ${vm.node}`,
  }));

  plain('stop', 'running', (vm) => ({
    workflow: 'vmStop',
    args: [{ vmid: vm.vmid }],
    operation: 'stop',
    summary: `stop VM ${vm.vmid} on ${vm.node}`,
  }));

  plain('destroy', 'stopped', (vm) => ({
    workflow: 'vmDestroy',
    args: [{ vmid: vm.vmid }],
    operation: 'destroy',
    summary: `destroy VM ${vm.vmid} on ${vm.node}`,
  }));

  plain(
    'set/cpu',
    'stopped',
    (vm, body) => {
      const { cpu } = body as z.infer<typeof cpuBody>;
      const max = config.limits.maxCpu;
      if (max && cpu > max) throw invalid(`cpu: must be at most VM_MAX_CPU (${max})`);
      return { workflow: 'vmSetCpu', args: [{ vmid: vm.vmid, cores: cpu }], operation: 'set-cpu', summary: `set VM ${vm.vmid} to ${cpu} vCPU` };
    },
    cpuBody,
  );

  plain(
    'set/memory',
    'stopped',
    (vm, body) => {
      const { memory } = body as z.infer<typeof memoryBody>;
      const max = config.limits.maxRamMb;
      if (max && memory > max) throw invalid(`memory: must be at most VM_MAX_RAM (${max} MB)`);
      return {
        workflow: 'vmSetMemory',
        args: [{ vmid: vm.vmid, memoryMb: memory }],
        operation: 'set-memory',
        summary: `set VM ${vm.vmid} to ${memory} MB of memory`,
      };
    },
    memoryBody,
  );

  plain(
    'set/disk',
    'stopped',
    (vm, body) => {
      const incrementGb = Number((body as z.infer<typeof diskBody>).disk.slice(0, -1));
      return {
        workflow: 'vmSetDisk',
        args: [{ vmid: vm.vmid, disk: 'scsi0', incrementGb, maxDiskGb: config.limits.maxDiskGb }],
        operation: 'set-disk',
        summary: `grow scsi0 of VM ${vm.vmid} by ${incrementGb}G`,
      };
    },
    diskBody,
  );

  return router;
}
