import type { Harness } from './harness';
import type { FaultSpec } from '../../sandbox/state/faults';
import type { SandboxCall } from '../../sandbox/cluster';
import { readApiRequests, type ApiRequestRecord } from '../../sandbox/api/requestLog';
import { listVms } from '../../sandbox/state/vmlist';

/**
 * What the sandbox cluster was asked to do, whichever way the service reaches it: `qm`,
 * `pvesh` and `pvesm` calls in CLI mode, REST requests in API mode. A suite that checks
 * behaviour asserts on these operations and injects its faults through `injectFaultOn`,
 * and so runs unchanged in both modes (TEST_PROXMOX_MODE=api).
 */

/** One operation the cluster carried out (or refused). */
export interface ProxmoxOperation {
  /** Where it ran: the node qm ran on, or the node of the API path. */
  node?: string;
  /**
   * A VM operation in qm's words (`create`, `set`, `importdisk`, `resize`, `migrate`,
   * `start`, `stop`, `shutdown`, `reboot`, `destroy`, `config`, `status`, `list`); any
   * other call as its API request, `GET /nodes/pve1/status` (what `pvesh get` sends);
   * `pvesm` calls as `pvesm status`.
   */
  op: string;
  vmid?: number;
  /** Parameters by their API names: `{ disk: 'scsi0', size: '24G' }`, `{ target: 'pve2' }`. */
  params: Record<string, string>;
  ok: boolean;
}

/** Where both logs stood: `operations(h, mark)` returns what came after. */
export interface OperationsMark {
  calls: number;
  requests: number;
}

export function proxmoxMode(h: Harness): 'cli' | 'api' {
  return h.config.proxmoxApi ? 'api' : 'cli';
}

export async function operationsMark(h: Harness): Promise<OperationsMark> {
  return { calls: (await h.sandbox.calls()).length, requests: readApiRequests(h.sandbox.dir).length };
}

/** Every operation in the order its log has them (CLI calls, then API requests), or those after `since`. */
export async function operations(h: Harness, since: OperationsMark = { calls: 0, requests: 0 }): Promise<ProxmoxOperation[]> {
  const calls = (await h.sandbox.calls()).slice(since.calls).map(fromCall);
  const requests = readApiRequests(h.sandbox.dir).slice(since.requests).map(fromRequest);
  return [...calls, ...requests];
}

/** The operations `op` on `vmid` (any VM when absent) after `since`. */
export async function operationsOn(h: Harness, op: string, vmid?: number, since?: OperationsMark): Promise<ProxmoxOperation[]> {
  return (await operations(h, since)).filter((o) => o.op === op && (vmid === undefined || o.vmid === vmid));
}

/**
 * A fault on the operation `op` (on `vmid`; on `node`, else wherever the VM is, else the
 * main node): its `qm` command in CLI mode, its API request in API mode. An operation
 * given as an API request (`GET /nodes`) is the `pvesh` call both ways.
 */
export async function injectFaultOn(
  h: Harness,
  target: { op: string; vmid?: number; node?: string },
  fault: Omit<FaultSpec, 'command' | 'node'>,
): Promise<void> {
  const request = /^(GET|POST|PUT|DELETE) (\/\S*)$/.exec(target.op);
  let command: string;
  if (request) command = `pvesh ${PVESH_VERB[request[1]]} ${request[2]}`;
  else if (proxmoxMode(h) === 'cli') command = ['qm', target.op, ...(target.vmid === undefined ? [] : [String(target.vmid)])].join(' ');
  else command = apiCommand(h, target);
  await h.sandbox.injectFault({ ...fault, command, ...(target.node ? { node: target.node } : {}) });
}

const PVESH_VERB: Record<string, string> = { GET: 'get', POST: 'create', PUT: 'set', DELETE: 'delete' };
const HTTP_METHOD: Record<string, string> = { get: 'GET', create: 'POST', set: 'PUT', delete: 'DELETE' };

/** The `pvesh` form of the request an operation is in API mode, as the sandbox API matches faults. */
function apiCommand(h: Harness, t: { op: string; vmid?: number; node?: string }): string {
  const node = t.node ?? (t.vmid === undefined ? undefined : listVms(h.sandbox.dir).find((v) => v.vmid === t.vmid)?.node) ?? h.sandbox.mainNode;
  if (t.op === 'create') return `pvesh create /nodes/${node}/qemu`;
  if (t.op === 'list') return `pvesh get /nodes/${node}/qemu`;
  if (t.vmid === undefined) throw new Error(`a fault on '${t.op}' in API mode needs the VMID`);
  const vm = `/nodes/${node}/qemu/${t.vmid}`;
  const byOp: Record<string, string> = {
    set: `set ${vm}/config`,
    // The product imports with a POST of the disk's `import-from`, and sets everything else with PUT.
    importdisk: `create ${vm}/config`,
    config: `get ${vm}/config`,
    resize: `set ${vm}/resize`,
    migrate: `create ${vm}/migrate`,
    start: `create ${vm}/status/start`,
    stop: `create ${vm}/status/stop`,
    shutdown: `create ${vm}/status/shutdown`,
    reboot: `create ${vm}/status/reboot`,
    status: `get ${vm}/status/current`,
    destroy: `delete ${vm}`,
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

function fromRequest(r: ApiRequestRecord): ProxmoxOperation {
  const ok = r.status >= 200 && r.status < 300;
  const base = { ...(r.node !== undefined ? { node: r.node } : {}), ok };
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
    return Object.values(params).some((v) => /(?:^|,)import-from=/.test(v)) ? 'importdisk' : 'set';
  }
  if (sub === '/resize') return 'resize';
  if (sub === '/migrate') return 'migrate';
  if (sub === '/status/current') return 'status';
  if (sub === '/cloudinit/dump') return 'cloudinit dump';
  const power = /^\/status\/(start|stop|shutdown|reboot)$/.exec(sub)?.[1];
  return method === 'POST' ? power : undefined;
}
