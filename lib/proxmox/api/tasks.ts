import { classifyFailure } from '../errors';
import type { PveApi } from './http';

/**
 * `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:`, the id Proxmox gives every
 * task it forks. The node is in it, so a UPID alone is enough to find the task again.
 * Parsed as pve-common's `PVE::Tools::upid_decode` does: pid and starttime are 8 hex
 * digits, pstart (the worker's start in clock ticks since boot) 8 or 9, as it outgrows 32
 * bits on a node up for more than 497 days (`upid_encode` prints it with `%08X`).
 */
const UPID = /^UPID:([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?):[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8,9}:[0-9A-Fa-f]{8}:([^:\s]+):([^:\s]*):([^:\s]+):$/;

export function parseUpid(upid: string): { node: string; type: string; id: string } | undefined {
  const m = UPID.exec(upid);
  return m ? { node: m[1], type: m[3], id: m[4] } : undefined;
}

export function isUpid(value: unknown): value is string {
  return typeof value === 'string' && parseUpid(value) !== undefined;
}

export interface TaskStatus {
  status: 'running' | 'stopped' | (string & {});
  exitstatus?: string;
}

/** `GET /nodes/{node}/tasks/{upid}/status`. */
export async function taskStatus(api: PveApi, upid: string, signal?: AbortSignal): Promise<TaskStatus> {
  const where = parseUpid(upid);
  if (!where) throw new Error(`not a task id: ${upid}`);
  return api.get<TaskStatus>(`/nodes/${encodeURIComponent(where.node)}/tasks/${encodeURIComponent(upid)}/status`, {}, { node: where.node, signal });
}

/** Ended with an error (not running, not OK, not warnings only). */
export function taskFailed(status: TaskStatus): boolean {
  return status.status === 'stopped' && !SUCCESS.test(status.exitstatus ?? '');
}

export interface FollowOptions {
  /** Each new line of the task log, in order. */
  onLine?: (line: string) => void;
  signal?: AbortSignal;
  /** What the task does, for messages: `POST /nodes/pve1/qemu/120/migrate`. */
  command?: string;
  /** Between status polls, throughout. Default: 100 ms, doubling up to 1 s. */
  pollMs?: number;
  /** Whether an abort of `signal` stops the task too (see TaskOptions). */
  stopTaskOnAbort?: (reason: unknown) => boolean;
}

/** A task that ended OK or with warnings only. */
const SUCCESS = /^(?:OK|WARNINGS: \d+)$/;
const LOG_PAGE = 500;

/**
 * Follows a task to its end, as `pvesh` and the GUI do: polls
 * `/nodes/<node>/tasks/<upid>/status` and reads new lines of `/log` as they come. A task
 * that ended with an error becomes the error class its message maps to (the message is
 * the task's exit status, the log's last lines add context). An abort stops following;
 * the task itself is stopped only when `stopTaskOnAbort` says so.
 */
export async function followTask(api: PveApi, upid: string, opts: FollowOptions = {}): Promise<void> {
  const where = parseUpid(upid);
  if (!where) throw new Error(`not a task id: ${upid}`);
  const base = `/nodes/${encodeURIComponent(where.node)}/tasks/${encodeURIComponent(upid)}`;
  // Most tasks (a start, a config change, a small import) end within a second: polling
  // at 1 s from the start would add most of a second to each step of an install.
  let pollMs = opts.pollMs ?? 100;
  const tail: string[] = [];
  let seen = 0;

  const readLog = async () => {
    for (;;) {
      const page = await api.get<Array<{ n: number; t: string }>>(`${base}/log`, { start: seen, limit: LOG_PAGE }, { node: where.node });
      // A log nothing was written to yet reads as the one line `no content`; taking it for
      // line 1 would skip the real line 1. A task that ended has written at least its status.
      if (seen === 0 && page?.length === 1 && page[0].n === 1 && page[0].t === 'no content') return;
      const fresh = (page ?? []).filter((l) => l.n > seen).sort((a, b) => a.n - b.n);
      for (const l of fresh) {
        seen = l.n;
        // The log ends with `TASK OK` / `TASK ERROR: ...`: the status says that already.
        if (/^TASK (?:OK|ERROR:|WARNINGS:)/.test(l.t)) continue;
        tail.push(l.t);
        if (tail.length > 20) tail.shift();
        opts.onLine?.(l.t);
      }
      if (fresh.length < LOG_PAGE) return;
    }
  };

  try {
    for (;;) {
      const status = await api.get<TaskStatus>(`${base}/status`, {}, { node: where.node, signal: opts.signal });
      await readLog();
      if (status.status === 'stopped') {
        const exit = status.exitstatus ?? 'unknown';
        if (SUCCESS.test(exit)) return;
        throw classifyFailure({
          node: where.node,
          command: opts.command ?? `task ${where.type} ${where.id}`.trim(),
          exitCode: 1,
          stderr: [exit, ...tail.filter((l) => l.trim() !== exit)].join('\n'),
        });
      }
      await sleep(pollMs, opts.signal);
      if (opts.pollMs === undefined) pollMs = Math.min(1000, pollMs * 2);
    }
  } catch (err) {
    if (opts.signal?.aborted && opts.stopTaskOnAbort?.(opts.signal.reason)) {
      await api.request('DELETE', base, {}, { node: where.node }).catch(() => undefined);
    }
    throw err;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
