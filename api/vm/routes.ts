import type { Request, Response } from 'express';
import type { Client } from '@temporalio/client';
import type { z } from 'zod';
import { adoptBody, cpuBody, diskBody, type FailureType, memoryBody, nodeBody, ownerOf } from '../../contract';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/observability/log';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { clientIp, tenantScope } from '../guard';
import { startedByMemo } from '../startedBy';
import { openEventStream, streamProgress, type Streams } from '../sse';
import { answerHeldOpen, limitsFor, type RouteLimits } from '../limits';
import { HttpError, InvalidRequestError, parseInput } from '../errors';
import { parseVmid, vmidProblem } from './vmid';
import { vmService, type Operation, type VmFacts, type VmNotes } from './service';
import { answerAdopted, answerOk, answerStatus } from './presentation';
import * as answers from '../openapi/responses';
import { type Answer, err, NO_SUCH_VM, stream } from '../openapi/answer';
import { defineRoutes, type RouteSpec } from '../route';

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

/** What the VM routes share in one app. */
function vmRouteState(deps: VmRouteDeps) {
  return { ...deps, vms: vmService(deps) };
}
type VmRouteState = ReturnType<typeof vmRouteState>;

/** One operation route: what it needs, how it answers, its body, and the workflow it starts. */
interface OperationRoute<B> {
  path: string;
  needs: 'running' | 'stopped';
  /** `stream`: the SSE stream of the workflow; `ok`: waits for it, then answers `ok`. */
  answer: 'stream' | 'ok';
  summary: string;
  answers: Record<number, Answer>;
  limits: RouteLimits;
  body?: z.ZodType<B>;
  build(vm: VmFacts & { conf?: VmNotes }, body: B, s: VmRouteState): Operation | Promise<Operation>;
}

const operation = <B = undefined>(r: OperationRoute<B>) => r;

const refusals = (invalid: string, refused: string) => ({ 400: err(invalid), 404: err(NO_SUCH_VM), 409: err(refused) });
const inWrongState = refusals('not a VMID', 'not in the managed set, or in the wrong state');
const invalidOrRunning = (invalid: string) => refusals(invalid, 'not in the managed set, or running');
const DONE: Answer = { description: 'done', text: answers.okText };

function vmidOf(req: Request): number {
  const raw = String(req.params.id);
  const vmid = parseVmid(raw);
  if (vmid === undefined) throw new InvalidRequestError(vmidProblem(raw));
  return vmid;
}

const operations = [
  operation({
    path: 'start',
    summary: 'Start a VM and wait for its SSH',
    answers: { 200: stream('the operation, until `event: close`'), ...inWrongState },
    needs: 'stopped',
    answer: 'stream',
    limits: { stream: true },
    build: async (vm, _body, { vms }) => ({ workflow: 'vmStart', args: [await vms.guest(vm)], operation: 'start', summary: `start VM ${vm.vmid} on ${vm.node}` }),
  }),
  operation({
    path: 'reboot',
    summary: 'Reboot a VM and wait for its SSH',
    answers: { 200: stream('the operation, until `event: close`'), ...inWrongState },
    needs: 'running',
    answer: 'stream',
    limits: { stream: true },
    build: async (vm, _body, { vms }) => ({ workflow: 'vmReboot', args: [await vms.guest(vm)], operation: 'reboot', summary: `reboot VM ${vm.vmid} on ${vm.node}` }),
  }),
  operation({
    path: 'set/node',
    summary: 'Migrate a stopped VM to another node',
    answers: { 200: stream('the migration, until `event: close`'), ...invalidOrRunning('the body is invalid') },
    needs: 'stopped',
    answer: 'stream',
    limits: { stream: true },
    body: nodeBody,
    build: (vm, { node }, { knownNodes }) => {
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
  operation({
    path: 'shutdown',
    summary: 'Shutdown a VM',
    answers: { 200: DONE, ...inWrongState },
    needs: 'running',
    answer: 'ok',
    limits: { long: true },
    build: (vm) => ({ workflow: 'vmShutdown', args: [{ vmid: vm.vmid }], operation: 'shutdown', summary: `shut down VM ${vm.vmid} on ${vm.node}` }),
  }),
  operation({
    path: 'stop',
    summary: 'Stop a VM',
    answers: { 200: DONE, ...inWrongState },
    needs: 'running',
    answer: 'ok',
    limits: { long: true },
    build: (vm) => ({ workflow: 'vmStop', args: [{ vmid: vm.vmid }], operation: 'stop', summary: `stop VM ${vm.vmid} on ${vm.node}` }),
  }),
  operation({
    path: 'destroy',
    summary: 'Destroy a VM',
    answers: { 200: DONE, ...inWrongState },
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
  operation({
    path: 'set/cpu',
    summary: "Change a stopped VM's cpu",
    answers: { 200: DONE, ...invalidOrRunning('the body is invalid (the field is named)') },
    needs: 'stopped',
    answer: 'ok',
    limits: { long: true },
    body: cpuBody,
    build: (vm, { cpu }, { config }) => {
      const max = config.limits.maxCpu;
      if (max && cpu > max) throw new InvalidRequestError(`cpu: must be at most VM_MAX_CPU (${max})`);
      return { workflow: 'vmSetCpu', args: [{ vmid: vm.vmid, cores: cpu }], operation: 'set-cpu', summary: `set VM ${vm.vmid} to ${cpu} vCPU` };
    },
  }),
  operation({
    path: 'set/memory',
    summary: "Change a stopped VM's memory",
    answers: { 200: DONE, ...invalidOrRunning('the body is invalid (the field is named)') },
    needs: 'stopped',
    answer: 'ok',
    limits: { long: true },
    body: memoryBody,
    build: (vm, { memory }, { config }) => {
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
  operation({
    path: 'set/disk',
    summary: "Change a stopped VM's disk",
    answers: { 200: DONE, ...invalidOrRunning('the body is invalid (the field is named)') },
    needs: 'stopped',
    answer: 'ok',
    limits: { long: true },
    body: diskBody,
    build: (vm, { disk }, { config }) => {
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

async function runOperation(s: VmRouteState, op: OperationRoute<unknown>, req: Request, res: Response) {
  const { vms, streams } = s;
  const vmid = vmidOf(req);
  vms.refuseDisabled(vmid);
  const body = op.body ? parseInput(op.body, req.body) : undefined;
  const vm = await vms.preconditions(vmid, op.needs, tenantScope(res));
  const h = await vms.start(vm, { ...(await op.build(vm, body, s)), memo: startedByMemo(res) });
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
}

const operationRoutes = (operations as Array<OperationRoute<unknown>>).map(
  (op): RouteSpec<VmRouteState> => ({
    method: 'POST',
    path: `/vm/:id/${op.path}`,
    summary: op.summary,
    role: 'operate',
    body: op.body,
    answers: op.answers,
    limits: op.limits,
    handle: (s, req, res) => runOperation(s, op, req, res),
  }),
);

export const vmRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: vmRouteState,
  routes: [
    ...operationRoutes,
    /**
     * Adoption: a VM made elsewhere joins the managed set on purpose. Runs as the workflow
     * `vmAdopt` under `vm-<vmid>` (so it is in history, and never runs beside another
     * operation on the VM), and answers once the marker is written. Not every VM may join:
     * a template (clones depend on it), a protected VM (someone said "do not touch") and a
     * VMID outside ADOPT_VMID_RANGE (another team's, or one whose address does not follow
     * the install scheme) are refused before anything starts.
     */
    {
      method: 'POST',
      path: '/vm/:id/adopt',
      summary: 'Take a VM made elsewhere into the managed set',
      role: 'admin',
      body: adoptBody,
      answers: {
        200: { description: 'adopted', json: answers.adopted },
        400: err('the body is not empty, or the VMID is outside ADOPT_VMID_RANGE'),
        404: err('no such VM'),
        409: err('already managed, a template, or protected'),
      },
      handle: async ({ config, vms }, req, res) => {
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
      },
    },
    {
      method: 'GET',
      path: '/vm/:id/status',
      summary: 'Whether a VM runs',
      answers: { 200: { description: 'its state', text: answers.vmState }, 400: err('not a VMID'), 404: err(NO_SUCH_VM) },
      handle: async ({ vms }, req, res) => {
        const vm = await vms.visible(vmidOf(req), tenantScope(res));
        answerStatus(res, vm.state);
      },
    },
  ],
});
