import type { Harness } from './harness';
import type { FaultSpec } from '../../sandbox/state/faults';
import type { SandboxCall } from '../../sandbox/cluster';
import { readApiRequests, type ApiRequestRecord } from '../../sandbox/api/requestLog';
import { decodeUpid } from '../../sandbox/api/upid';
import { readExitStatus, taskLogFile, taskRunning } from '../../sandbox/api/tasks';
import { vmOwner } from '../../sandbox/state/vmlist';

/**
 * What the sandbox cluster was asked to do, whichever way it was reached: `qm`, `pvesh`
 * and `pvesm` calls in CLI mode, REST requests (and the tasks they started) in API mode.
 * Both read as operations in qm's words, so a suite asserts behaviour ("VM 101 was
 * started on pve2", "nothing was changed") once for both modes, and injects its faults
 * through `injectFaultOn` without knowing how an operation reaches the node; it then runs
 * unchanged with TEST_PROXMOX_MODE=api.
 *
 *     const mark = await operationsMark(h);
 *     ...
 *     expect(await operationsOn(h, 'resize', vmid, mark)).toEqual([...]);
 *     expect((await operations(h, mark)).filter(isMutating)).toEqual([]);
 */

/** One operation the cluster carried out, or refused. */
export interface ProxmoxOperation {
  /** Where it ran: the node qm ran on, or the node of the API path (cluster-wide paths: the main node). */
  node: string;
  /**
   * A VM operation in qm's words (`create`, `set`, `importdisk`, `resize`, `migrate`,
   * `start`, `stop`, `shutdown`, `reboot`, `destroy`, `template`, `config`, `status`, `list`,
   * `cloudinit dump`); any other call as its API request, `GET /nodes/pve1/status` (what
   * `pvesh get` sends); `pvesm` calls as `pvesm status`.
   */
  op: string;
  vmid?: number;
  /** Parameters by their API names: `{ disk: 'scsi0', size: '24G' }`, `{ target: 'pve2' }`. */
  params: Record<string, string>;
  /**
   * Whether it succeeded: the exit code of a CLI call, the status of a request, or, for a
   * request that started a task, the task's exit status; undefined while that task runs.
   */
  ok?: boolean;
}

/** Where both logs stood: `operations(h, mark)` returns what came after. */
export interface OperationsMark {
  calls: number;
  requests: number;
}

const mode = (h: Harness): 'cli' | 'api' => (h.config.proxmoxApi ? 'api' : 'cli');

export async function operationsMark(h: Harness): Promise<OperationsMark> {
  return { calls: (await h.sandbox.calls()).length, requests: readApiRequests(h.sandbox.dir).length };
}

/**
 * Every operation in the order its log has them (CLI calls, then API requests), or those
 * after `since`. Both logs are read in either mode: what the cluster saw, however it came.
 */
export async function operations(h: Harness, since: OperationsMark = { calls: 0, requests: 0 }): Promise<ProxmoxOperation[]> {
  const calls = (await h.sandbox.calls()).slice(since.calls).map(fromCall);
  const requests = readApiRequests(h.sandbox.dir)
    .slice(since.requests)
    .map((r) => fromRequest(h, r));
  return [...calls, ...requests];
}

/** The operations `op` on `vmid` (any VM when absent) after `since`. */
export async function operationsOn(h: Harness, op: string, vmid?: number, since?: OperationsMark): Promise<ProxmoxOperation[]> {
  return (await operations(h, since)).filter((o) => o.op === op && (vmid === undefined || o.vmid === vmid));
}

const READS: ReadonlySet<string> = new Set(['config', 'status', 'list', 'cloudinit dump', 'pvesm status']);

/** Whether the operation changed the cluster, or tried to: anything but a read. */
export const isMutating = (o: ProxmoxOperation): boolean => !READS.has(o.op) && !o.op.startsWith('GET ');

/**
 * A fault on the operation `op` (on `vmid` when given; on `node` when given, else on any
 * node). In CLI mode it is on the `qm` command. In API mode an operation Proxmox runs as a
 * task (create, importdisk, resize, migrate, start, stop, shutdown, reboot, destroy,
 * template) fails
 * or slows down in its task, as Proxmox reports such a failure, so the fault is on the
 * task's qm words; a synchronous one (set, config, status, list, cloudinit dump) on its
 * request, whose path names the node (`node`, else wherever the VM is, else the main
 * node). An operation given as an API request (`GET /nodes`) is its `pvesh` call both ways.
 */
export async function injectFaultOn(
  h: Harness,
  target: { op: string; vmid?: number; node?: string },
  fault: Omit<FaultSpec, 'command' | 'node'>,
): Promise<void> {
  await h.sandbox.injectFault({ ...fault, command: faultCommand(h, target), ...(target.node ? { node: target.node } : {}) });
}

const PVESH_VERB: Record<string, string> = { GET: 'get', POST: 'create', PUT: 'set', DELETE: 'delete' };
const HTTP_METHOD: Record<string, string> = { get: 'GET', create: 'POST', set: 'PUT', delete: 'DELETE' };

function faultCommand(h: Harness, t: { op: string; vmid?: number; node?: string }): string {
  const request = /^(GET|POST|PUT|DELETE) (\/\S*)$/.exec(t.op);
  if (request) return `pvesh ${PVESH_VERB[request[1]]} ${request[2]}`;
  const qm = (words: string) => [`qm ${words}`, ...(t.vmid === undefined ? [] : [String(t.vmid)])].join(' ');
  if (mode(h) === 'cli') return qm(t.op);
  // The disk import is the one asynchronous config change (a POST with import-from): a
  // qmconfig task, which faults match as `qm set`.
  if (t.op === 'importdisk') return qm('set');
  if (['create', 'resize', 'migrate', 'start', 'stop', 'shutdown', 'reboot', 'destroy', 'template'].includes(t.op)) return qm(t.op);
  const node = t.node ?? (t.vmid === undefined ? undefined : vmOwner(h.sandbox.dir, t.vmid)) ?? h.sandbox.mainNode;
  if (t.op === 'list') return `pvesh get /nodes/${node}/qemu`;
  if (t.vmid === undefined) throw new Error(`a fault on '${t.op}' in API mode needs the VMID (it is part of the request path)`);
  const vm = `/nodes/${node}/qemu/${t.vmid}`;
  const byOp: Record<string, string> = {
    set: `set ${vm}/config`,
    config: `get ${vm}/config`,
    status: `get ${vm}/status/current`,
    'cloudinit dump': `get ${vm}/cloudinit/dump`,
  };
  if (!byOp[t.op]) throw new Error(`no API request known for the operation '${t.op}'`);
  return `pvesh ${byOp[t.op]}`;
}

/** qm's positional arguments after the VMID, by their API names. */
const QM_POSITIONAL: Record<string, string[]> = {
  importdisk: ['source', 'storage'],
  resize: ['disk', 'size'],
  migrate: ['target'],
  'cloudinit dump': ['type'],
};

/** `--key value`, `--key=value` (and single-dash) options; the rest in order. */
function splitOptions(args: string[]): { positional: string[]; options: Record<string, string> } {
  const positional: string[] = [];
  const options: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const m = /^--?([a-zA-Z][\w-]*)(?:=(.*))?$/.exec(args[i]);
    if (!m) positional.push(args[i]);
    else if (m[2] !== undefined) options[m[1]] = m[2];
    else options[m[1]] = args[++i] ?? '';
  }
  return { positional, options };
}

function fromCall(c: SandboxCall): ProxmoxOperation {
  const [tool, ...rest] = c.argv;
  const ok = c.exitCode === 0;
  if (tool === 'pvesh' && HTTP_METHOD[rest[0]]) {
    const { options } = splitOptions(rest.slice(2));
    delete options['output-format'];
    return { node: c.node, op: `${HTTP_METHOD[rest[0]]} ${rest[1]}`, params: options, ok };
  }
  if (tool !== 'qm') {
    const { options } = splitOptions(rest.slice(1));
    return { node: c.node, op: `${tool} ${rest[0] ?? ''}`.trim(), params: options, ok };
  }
  let [sub, ...args] = rest;
  // `qm disk import|resize` are `qm importdisk|resize`; `qm cloudinit dump` one command.
  if (sub === 'disk') [sub, args] = [args[0] === 'import' ? 'importdisk' : args[0], args.slice(1)];
  if (sub === 'cloudinit') [sub, args] = [`cloudinit ${args[0]}`, args.slice(1)];
  const { positional, options } = splitOptions(args);
  const vmid = /^\d+$/.test(positional[0] ?? '') ? Number(positional.shift()) : undefined;
  const named = Object.fromEntries((QM_POSITIONAL[sub] ?? []).flatMap((name, i) => (positional[i] === undefined ? [] : [[name, positional[i]]])));
  return { node: c.node, op: sub, ...(vmid !== undefined ? { vmid } : {}), params: { ...named, ...options }, ok };
}

/** A request's outcome: its task's exit status when it started one (undefined while that runs), else its HTTP status. */
function requestOk(h: Harness, r: ApiRequestRecord): boolean | undefined {
  if (r.status < 200 || r.status >= 300) return false;
  const task = r.upid === undefined ? undefined : decodeUpid(r.upid);
  if (!task) return true;
  if (taskRunning(task)) return undefined;
  const status = readExitStatus(taskLogFile(h.sandbox.dir, r.upid!)!);
  return status === 'OK' || status.startsWith('WARNINGS');
}

function fromRequest(h: Harness, r: ApiRequestRecord): ProxmoxOperation {
  const base = { node: r.node ?? h.sandbox.mainNode, ok: requestOk(h, r) };
  const m = /^\/nodes\/[^/]+\/qemu(?:\/(\d+)(\/.*)?)?$/.exec(r.path);
  if (!m) return { ...base, op: `${r.method} ${r.path}`, params: r.params };
  const [, id, sub = ''] = m;
  if (id === undefined) {
    if (r.method === 'GET') return { ...base, op: 'list', params: r.params };
    const { vmid, ...params } = r.params;
    return { ...base, op: 'create', ...(vmid !== undefined ? { vmid: Number(vmid) } : {}), params };
  }
  return { ...base, op: vmOperation(r.method, sub, r.params) ?? `${r.method} ${r.path}`, vmid: Number(id), params: r.params };
}

/** qm's name of a request below `/nodes/{node}/qemu/{vmid}`. */
function vmOperation(method: string, sub: string, params: Record<string, string>): string | undefined {
  if (sub === '' && method === 'DELETE') return 'destroy';
  if (sub === '/config') {
    if (method === 'GET') return 'config';
    // The product imports with a POST of the disk's `import-from`, and sets everything else with PUT.
    return Object.values(params).some((v) => /(?:^|,)import-from=/.test(v)) ? 'importdisk' : 'set';
  }
  if (sub === '/resize') return 'resize';
  if (sub === '/migrate') return 'migrate';
  if (sub === '/template') return 'template';
  if (sub === '/status/current') return 'status';
  if (sub === '/cloudinit/dump') return 'cloudinit dump';
  const power = /^\/status\/(start|stop|shutdown|reboot)$/.exec(sub)?.[1];
  return method === 'POST' ? power : undefined;
}
