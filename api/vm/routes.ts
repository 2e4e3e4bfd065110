import { Router, type Request, type Response } from 'express';
import type { Client } from '@temporalio/client';
import type { z } from 'zod';
import { adoptBody, cpuBody, diskBody, type FailureType, memoryBody, nodeBody, ownerOf } from '../../contract';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/observability/log';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { clientIp, requireRole, tenantScope } from '../guard';
import { startedByMemo } from '../startedBy';
import { openEventStream, streamProgress, type Streams } from '../sse';
import { answerHeldOpen, limitsFor, type RouteLimits } from '../limits';
import { HttpError, InvalidRequestError, parseInput } from '../errors';
import { parseVmid, vmidProblem } from './vmid';
import { vmService, type Operation, type VmFacts, type VmNotes } from './service';
import { answerAdopted, answerOk, answerStatus } from './presentation';

/**
 * `/vm/:id/...`: the state of one VM, and the operations on it. Every check that can fail
 * fast runs before a workflow starts, in this order: a malformed VMID, a disabled VMID, a
 * malformed body → 400; a VMID the cluster does not know → 404; a VM outside the managed
 * set (no owner marker, unless MANAGE_ALL_VMS) → 409; the wrong power state → 400 with
 * the seed's "VM is running" / "VM is not running"; another operation or an install
 * holding the VM → 409. Then the operation runs as a short workflow; streamed operations
 * answer with its SSE stream, the others answer `ok` when it has finished.
 */

export interface VmRouteDeps {
  streams: Streams;
  config: Config;
  client: Client;
  proxmox: ProxmoxCluster;
  knownNodes: string[];
  logger: Logger;
}

/** One operation route: what it needs, how it answers, its body, and the workflow it starts. */
interface OperationRoute<B> {
  path: string;
  needs: 'running' | 'stopped';
  /** `stream`: the SSE stream of the workflow; `ok`: waits for it, then answers `ok`. */
  answer: 'stream' | 'ok';
  limits: RouteLimits;
  body?: z.ZodType<B>;
  build(vm: VmFacts & { conf?: VmNotes }, body: B): Operation | Promise<Operation>;
}

const route = <B = undefined>(r: OperationRoute<B>) => r;

function vmidOf(req: Request): number {
  const raw = String(req.params.id);
  const vmid = parseVmid(raw);
  if (vmid === undefined) throw new InvalidRequestError(vmidProblem(raw));
  return vmid;
}

export function vmRoutes({ config, client, proxmox, knownNodes, streams, logger }: VmRouteDeps): Router {
  const router = Router();
  const guard = requireRole(config, 'operate');
  const vms = vmService({ config, client, proxmox, logger });
  const guestOf = (vm: VmFacts) => vms.guest(vm);

  const operations = [
    route({
      path: 'start',
      needs: 'stopped',
      answer: 'stream',
      limits: { stream: true },
      build: async (vm) => ({ workflow: 'vmStart', args: [await guestOf(vm)], operation: 'start', summary: `start VM ${vm.vmid} on ${vm.node}` }),
    }),
    route({
      path: 'reboot',
      needs: 'running',
      answer: 'stream',
      limits: { stream: true },
      build: async (vm) => ({ workflow: 'vmReboot', args: [await guestOf(vm)], operation: 'reboot', summary: `reboot VM ${vm.vmid} on ${vm.node}` }),
    }),
    route({
      path: 'set/node',
      needs: 'stopped',
      answer: 'stream',
      limits: { stream: true },
      body: nodeBody,
      build: (vm, { node }) => {
        if (!knownNodes.includes(node)) throw new InvalidRequestError(`node: must be one of the cluster's nodes (${knownNodes.join(', ')})`);
        if (node === vm.node) throw new HttpError(400, `VM ${vm.vmid} is already on node ${node}`);
        return {
          workflow: 'vmMigrate',
          args: [{ vmid: vm.vmid, from: vm.node, target: node }],
          operation: 'migrate',
          summary: `migrate VM ${vm.vmid} from ${vm.node} to ${node}`,
          node,
        };
      },
    }),
    route({
      path: 'shutdown',
      needs: 'running',
      answer: 'ok',
      limits: { long: true },
      build: (vm) => ({ workflow: 'vmShutdown', args: [{ vmid: vm.vmid }], operation: 'shutdown', summary: `shut down VM ${vm.vmid} on ${vm.node}` }),
    }),
    route({
      path: 'stop',
      needs: 'running',
      answer: 'ok',
      limits: { long: true },
      build: (vm) => ({ workflow: 'vmStop', args: [{ vmid: vm.vmid }], operation: 'stop', summary: `stop VM ${vm.vmid} on ${vm.node}` }),
    }),
    route({
      path: 'destroy',
      needs: 'stopped',
      answer: 'ok',
      limits: { long: true },
      build: (vm) => {
        // Proxmox would refuse it in the workflow; said here, before anything starts.
        if (vm.conf?.entries?.protection === '1') {
          throw new HttpError(409, `VM ${vm.vmid} is protected (protection: 1): turn protection off in Proxmox first to destroy it`);
        }
        return { workflow: 'vmDestroy', args: [{ vmid: vm.vmid }], operation: 'destroy', summary: `destroy VM ${vm.vmid} on ${vm.node}` };
      },
    }),
    route({
      path: 'set/cpu',
      needs: 'stopped',
      answer: 'ok',
      limits: { long: true },
      body: cpuBody,
      build: (vm, { cpu }) => {
        const max = config.limits.maxCpu;
        if (max && cpu > max) throw new InvalidRequestError(`cpu: must be at most VM_MAX_CPU (${max})`);
        return { workflow: 'vmSetCpu', args: [{ vmid: vm.vmid, cores: cpu }], operation: 'set-cpu', summary: `set VM ${vm.vmid} to ${cpu} vCPU` };
      },
    }),
    route({
      path: 'set/memory',
      needs: 'stopped',
      answer: 'ok',
      limits: { long: true },
      body: memoryBody,
      build: (vm, { memory }) => {
        const max = config.limits.maxRamMb;
        if (max && memory > max) throw new InvalidRequestError(`memory: must be at most VM_MAX_RAM (${max} MB)`);
        return {
          workflow: 'vmSetMemory',
          args: [{ vmid: vm.vmid, memoryMb: memory }],
          operation: 'set-memory',
          summary: `set VM ${vm.vmid} to ${memory} MB of memory`,
        };
      },
    }),
    route({
      path: 'set/disk',
      needs: 'stopped',
      answer: 'ok',
      limits: { long: true },
      body: diskBody,
      build: (vm, { disk }) => {
        const incrementGb = Number(disk.slice(0, -1));
        return {
          workflow: 'vmSetDisk',
          args: [{ vmid: vm.vmid, disk: 'scsi0', incrementGb, maxDiskGb: config.limits.maxDiskGb }],
          operation: 'set-disk',
          summary: `grow scsi0 of VM ${vm.vmid} by ${incrementGb}G`,
        };
      },
    }),
  ];

  for (const op of operations as Array<OperationRoute<unknown>>) {
    router.post(`/vm/:id/${op.path}`, ...limitsFor(op.limits, streams.limiter), guard, async (req: Request, res: Response) => {
      const vmid = vmidOf(req);
      vms.refuseDisabled(vmid);
      const body = op.body ? parseInput(op.body, req.body) : undefined;
      const vm = await vms.preconditions(vmid, op.needs, tenantScope(res));
      const h = await vms.start(vm, { ...(await op.build(vm, body)), memo: startedByMemo(res) });
      if (op.answer === 'stream') {
        openEventStream(res, h.workflowId, streams.limiter);
        await streamProgress(streams.readers, req, res, h, 0);
        return;
      }
      res.set('X-Workflow-Id', h.workflowId);
      // Started: the answer waits for the workflow however long a shutdown takes, so the
      // request deadline stops here, and the wait counts against the client's open streams.
      answerHeldOpen(res, streams.limiter);
      await vms.finished(h);
      answerOk(res);
    });
  }

  /**
   * Adoption: a VM made elsewhere joins the managed set on purpose. Runs as the workflow
   * `vmAdopt` under `vm-<vmid>` (so it is in history, and never runs beside another
   * operation on the VM), and answers once the marker is written. Not every VM may join:
   * a template (clones depend on it), a protected VM (someone said "do not touch") and a
   * VMID outside ADOPT_VMID_RANGE (another team's, or one whose address does not follow
   * the install scheme) are refused before anything starts.
   */
  router.post('/vm/:id/adopt', requireRole(config, 'admin'), async (req: Request, res: Response) => {
    const vmid = vmidOf(req);
    vms.refuseDisabled(vmid);
    const { tenant } = parseInput(adoptBody, req.body);
    const range = config.adoptVmidRange;
    if (vmid < range.start || vmid > range.end) {
      throw new HttpError(400, `VM ${vmid} is outside ADOPT_VMID_RANGE (${range.start}-${range.end}) and cannot be adopted`);
    }
    const vm = await vms.lookUp(vmid, { config: true });
    vms.requireInstance(vm);
    const conf = vm.conf ?? {};
    if (conf.entries?.template === '1') throw new HttpError(409, `VM ${vmid} is a template: its clones depend on it, so it cannot be adopted`);
    if (conf.entries?.protection === '1') {
      throw new HttpError(409, `VM ${vmid} is protected (protection: 1): turn protection off in Proxmox first if QemuRun should manage it`);
    }
    // Markers without a valid seal (forged, or written before sealing) do not make a VM
    // managed: adopting it replaces them with sealed ones.
    const marked = markerSealFor(config).check(conf, vmid);
    if (marked.sealed) {
      throw new HttpError(409, `VM ${vmid} is already managed by QemuRun (qemurun-owner=${marked.fields.owner}); there is nothing to adopt`, {
        type: 'AlreadyManagedError' satisfies FailureType,
      });
    }
    const h = await vms.start(vm, {
      workflow: 'vmAdopt',
      args: [{ vmid, by: clientIp(req), ...(tenant !== undefined ? { tenant } : {}) }],
      operation: 'adopt',
      summary: `adopt VM ${vmid}${conf.name ? ` (${conf.name})` : ''} on ${vm.node} into the managed set`,
      // The description records the address; the memo, which token it was.
      memo: startedByMemo(res),
    });
    res.set('X-Workflow-Id', h.workflowId);
    await vms.finished(h);
    const adopted = await vms.notesOf(vm.node, vmid).catch(() => undefined);
    answerAdopted(res, { vmid, owner: ownerOf(adopted?.description), workflowId: h.workflowId });
  });

  router.get('/vm/:id/status', async (req: Request, res: Response) => {
    const vm = await vms.visible(vmidOf(req), tenantScope(res));
    answerStatus(res, vm.state);
  });

  return router;
}
