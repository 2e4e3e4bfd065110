import path from 'node:path';
import type { FaultSpec } from '../../sandbox/state/faults';
import { clusterPaths } from '../../sandbox/state/paths';
import { readIfExists } from '../../sandbox/state/files';
import { loadModel } from '../../sandbox/state/model';
import { listTasks, type TaskEntry } from '../../sandbox/api/tasks';
import type { Harness } from './harness';

/**
 * What the sandbox cluster was asked to do, whichever way the service reached it: in CLI
 * mode the qm/pvesh/pvesm calls of its call log, in API mode the requests of its REST API's
 * access log and the tasks they forked. Both read as operations in qm's words, so a suite
 * asserts behaviour ("VM 101 was started on pve2", "nothing was changed") once for both
 * modes, and injects a fault on an operation without knowing how it reaches the node.
 */

export type ProxmoxMode = 'cli' | 'api';

export const proxmoxMode = (h: Harness): ProxmoxMode => (h.config.proxmoxApi ? 'api' : 'cli');

/** VM operations, named as qm names them; `get` is any other read (a pvesh/API path). */
export type OperationName =
  | 'create' | 'importdisk' | 'set' | 'resize' | 'migrate' | 'start' | 'stop' | 'shutdown' | 'reboot' | 'destroy'
  | 'config' | 'status' | 'list' | 'cloudinit' | 'download' | 'get' | 'other';

export interface ProxmoxOperation {
  /** The node it ran on (CLI) or the node of its API path (cluster-wide paths: the main node). */
  node: string;
  name: OperationName;
  vmid?: number;
  /** For `get` (and `other`): the API path, as pvesh and the REST API spell it. */
  path?: string;
  /** Whether it succeeded; undefined while its task still runs. */
  ok?: boolean;
}

const READS: OperationName[] = ['config', 'status', 'list', 'cloudinit', 'get'];

/** Whether the operation (tried to) change the cluster. */
export const isMutating = (op: ProxmoxOperation): boolean => !READS.includes(op.name);

// ---- CLI mode: the call log -----------------------------------------------------------

/** qm's subcommands, one or two words, as operations. */
const QM_NAME: Record<string, OperationName> = {
  create: 'create', importdisk: 'importdisk', 'disk import': 'importdisk', set: 'set', resize: 'resize', 'disk resize': 'resize',
  migrate: 'migrate', start: 'start', stop: 'stop', shutdown: 'shutdown', reboot: 'reboot', destroy: 'destroy',
  config: 'config', status: 'status', list: 'list', 'cloudinit dump': 'cloudinit',
};
const PVESH_METHOD: Record<string, string> = { get: 'GET', create: 'POST', set: 'PUT', delete: 'DELETE' };

function fromCall(c: { node: string; argv: string[]; exitCode: number }): ProxmoxOperation {
  const [tool, verb, ...rest] = c.argv;
  const ok = c.exitCode === 0;
  if (tool === 'qm') {
    const two = QM_NAME[`${verb} ${rest[0]}`];
    const [name, args] = two ? [two, rest.slice(1)] : [QM_NAME[verb] ?? 'other', rest];
    return { node: c.node, name, vmid: /^\d+$/.test(args[0] ?? '') ? Number(args[0]) : undefined, ok };
  }
  if (tool === 'pvesh') return { ...fromRequest(PVESH_METHOD[verb] ?? verb, rest[0] ?? '', c.node), ok };
  // pvesm status is the node's storage list.
  return { node: c.node, name: 'get', path: `/nodes/${c.node}/storage`, ok };
}

// ---- API mode: the access log and the task list ----------------------------------------

const VM_PATH = /^\/nodes\/([^/]+)\/qemu\/(\d+)(\/.*)?$/;

/** What a request (method and path below /api2/json) amounts to. */
function fromRequest(method: string, apiPath: string, mainNode: string): ProxmoxOperation {
  const vm = VM_PATH.exec(apiPath);
  const node = /^\/nodes\/([^/]+)/.exec(apiPath)?.[1] ?? mainNode;
  if (vm) {
    const vmid = Number(vm[2]);
    const sub = vm[3] ?? '';
    const status = /^\/status\/(start|stop|shutdown|reboot)$/.exec(sub)?.[1];
    const name: OperationName | undefined =
      method === 'GET'
        ? ({ '/config': 'config', '/status/current': 'status', '/cloudinit/dump': 'cloudinit' } as Record<string, OperationName>)[sub]
        : status && method === 'POST'
          ? (status as OperationName)
          : sub === '/config'
            // The service's only asynchronous config change is a disk import (import-from).
            ? (method === 'POST' ? 'importdisk' : 'set')
            : sub === '/resize' ? 'resize' : sub === '/migrate' ? 'migrate' : sub === '' && method === 'DELETE' ? 'destroy' : undefined;
    return { node, vmid, name: name ?? (method === 'GET' ? 'get' : 'other'), ...(name ? {} : { path: apiPath }) };
  }
  if (method === 'POST' && /^\/nodes\/[^/]+\/qemu$/.test(apiPath)) return { node, name: 'create' };
  if (method === 'GET' && /^\/nodes\/[^/]+\/qemu$/.test(apiPath)) return { node, name: 'list' };
  if (method === 'POST' && /\/download-url$/.test(apiPath)) return { node, name: 'download' };
  return { node, name: method === 'GET' ? 'get' : 'other', path: apiPath };
}

const TASK_NAME: Record<string, OperationName> = {
  qmcreate: 'create', qmconfig: 'importdisk', resize: 'resize', qmigrate: 'migrate', qmstart: 'start',
  qmstop: 'stop', qmshutdown: 'shutdown', qmreboot: 'reboot', qmdestroy: 'destroy', download: 'download',
};

interface Request {
  ms: number;
  method: string;
  path: string;
  status: number;
}

/** `<iso time> <address> <METHOD> /api2/json<path> <status>` lines of the API server. */
function readRequests(dir: string): Request[] {
  const raw = readIfExists(path.join(clusterPaths(dir).apiDir, 'access.log')) ?? '';
  const out: Request[] = [];
  for (const line of raw.split('\n')) {
    const m = /^(\S+) \S+ ([A-Z]+) \/api2\/json(\S*) (\d{3})$/.exec(line);
    if (m) out.push({ ms: Date.parse(m[1]), method: m[2], path: m[3].replace(/\/+$/, '') || '/', status: Number(m[4]) });
  }
  return out;
}

function readTasks(dir: string): TaskEntry[] {
  return loadModel(dir).nodes.flatMap((n) => listTasks(dir, n.name));
}

interface Seen {
  requests: number;
  upids: Set<string>;
}

/**
 * Operations in API mode: a request that forked a task is that task (its VMID and its
 * outcome are the task's); every other request is itself, successful when it answered 2xx.
 */
function apiOperations(h: Harness, since?: Seen): { ops: ProxmoxOperation[]; seen: Seen } {
  const dir = h.sandbox.dir;
  const mainNode = h.sandbox.mainNode;
  const requests = readRequests(dir);
  const tasks = readTasks(dir).sort((a, b) => a.starttime - b.starttime || (a.upid < b.upid ? -1 : 1));
  const seen = { requests: requests.length, upids: new Set(tasks.map((t) => t.upid)) };
  const timed: Array<{ ms: number; op: ProxmoxOperation }> = [];
  const forked = new Set<number>();
  for (const t of tasks) {
    // The request that forked it: the first one of its kind answered within its second.
    const i = requests.findIndex((r, j) => {
      if (forked.has(j) || r.status !== 200 || r.method === 'GET') return false;
      const op = fromRequest(r.method, r.path, mainNode);
      return op.node === t.node && op.name === TASK_NAME[t.type] && (op.vmid === undefined || String(op.vmid) === t.id) && Math.floor(r.ms / 1000) - t.starttime <= 1 && r.ms >= t.starttime * 1000;
    });
    if (i >= 0) forked.add(i);
    if (since?.upids.has(t.upid)) continue;
    const ok = t.running ? undefined : t.status === 'OK' || /^WARNINGS/.test(t.status ?? '');
    const vmid = /^\d+$/.test(t.id) ? Number(t.id) : undefined;
    timed.push({ ms: i >= 0 ? requests[i].ms : t.starttime * 1000, op: { node: t.node, name: TASK_NAME[t.type] ?? 'other', vmid, ok } });
  }
  requests.forEach((r, j) => {
    if (forked.has(j) || j < (since?.requests ?? 0)) return;
    timed.push({ ms: r.ms, op: { ...fromRequest(r.method, r.path, mainNode), ok: r.status >= 200 && r.status < 300 } });
  });
  return { ops: timed.sort((a, b) => a.ms - b.ms).map((t) => t.op), seen };
}

// ---- both -------------------------------------------------------------------------------

/** Every operation the cluster saw, in order. */
export async function operations(h: Harness): Promise<ProxmoxOperation[]> {
  if (proxmoxMode(h) === 'api') return apiOperations(h).ops;
  return (await h.sandbox.calls()).map(fromCall);
}

/**
 * Marks now; the function returned lists the operations the cluster saw after the mark.
 *
 *     const since = await watchOperations(h);
 *     ...
 *     expect((await since()).filter(isMutating)).toEqual([]);
 */
export async function watchOperations(h: Harness): Promise<() => Promise<ProxmoxOperation[]>> {
  if (proxmoxMode(h) === 'api') {
    const { seen } = apiOperations(h);
    return async () => apiOperations(h, seen).ops;
  }
  const before = (await h.sandbox.calls()).length;
  return async () => (await h.sandbox.calls()).slice(before).map(fromCall);
}

export interface OperationTarget {
  name: Exclude<OperationName, 'download' | 'other'>;
  vmid?: number;
  /** Only on this node (the node the CLI runs on, or the node of the API path). */
  node?: string;
  /** For `get`: the API path, e.g. `/cluster/resources`. */
  path?: string;
}

/**
 * The sandbox fault command an operation amounts to. Operations that run as a task match
 * the task's qm words in both modes; a synchronous API request matches the pvesh command
 * of its method and path, which names the node (the main node unless given).
 */
export function faultCommand(h: Harness, t: OperationTarget): string {
  const vmid = t.vmid === undefined ? '' : ` ${t.vmid}`;
  const node = t.node ?? h.sandbox.mainNode;
  const needVmid = () => {
    if (t.vmid === undefined) throw new Error(`a fault on '${t.name}' in API mode needs the VMID (it is part of the request path)`);
    return `/nodes/${node}/qemu/${t.vmid}`;
  };
  if (t.name === 'get') {
    if (!t.path) throw new Error("a fault on 'get' needs the API path");
    return `pvesh get ${t.path}`;
  }
  if (proxmoxMode(h) === 'cli') return t.name === 'cloudinit' ? `qm cloudinit dump${vmid}` : `qm ${t.name}${vmid}`;
  switch (t.name) {
    // The disk import is the asynchronous config change (import-from), a qmconfig task.
    case 'importdisk': return `qm set${vmid}`;
    case 'set': return `pvesh set ${needVmid()}/config`;
    case 'config': return `pvesh get ${needVmid()}/config`;
    case 'status': return `pvesh get ${needVmid()}/status/current`;
    case 'cloudinit': return `pvesh get ${needVmid()}/cloudinit/dump`;
    case 'list': return `pvesh get /nodes/${node}/qemu`;
    default: return `qm ${t.name}${vmid}`;
  }
}

/** Injects a fault (a delay, a hang, a failure) on the operation, whichever the mode. */
export async function injectFaultOn(h: Harness, t: OperationTarget, fault: Omit<FaultSpec, 'command' | 'node'>): Promise<void> {
  await h.sandbox.injectFault({ ...fault, command: faultCommand(h, t), node: t.node });
}

/** The mode the test file runs in, known before its harness starts. */
export const fileMode = (): ProxmoxMode => (process.env.TEST_PROXMOX_MODE === 'api' ? 'api' : 'cli');

/**
 * A test of something only one mode has (the SFTP copy of an image in CLI mode, the
 * node's own download in API mode): it runs in `mode`, and is skipped in the other with
 * the reason in its title. `modeSpecific('cli', 'images pass through the service')('...', fn)`
 */
export function modeSpecific(mode: ProxmoxMode, why: string): (title: string, fn: jest.ProvidesCallback, timeout?: number) => void {
  return (title, fn, timeout) => (fileMode() === mode ? test : test.skip)(`mode-specific (${mode} only: ${why}): ${title}`, fn, timeout);
}
