import type { Client } from '@temporalio/client';
import { progressQuery } from '../../contract';
import { watch, type WatchedStream } from './sseClient';
import { billableEvents, spansOf } from './history';
import { temporal } from '@temporalio/proto';

const EventType = temporal.api.enums.v1.EventType;

export interface InstallRun {
  workflowId: string;
  ok: boolean;
  vmid?: number;
  /** From the POST to the stream's close, in seconds. */
  seconds: number;
  /** Per event of the install's own stream: arrival at the client minus recording in the workflow (ms). */
  latenciesMs: number[];
  historyEvents: number;
  /** Events of the kinds Temporal Cloud bills as actions (history.ts), in all and by kind. */
  billable: ReturnType<typeof billableEvents>;
  /** Workflow tasks the run took (completed ones, as the history records them). */
  workflowTasks: number;
  /** Per activity: from its scheduling to its start, as the history records them (ms). */
  scheduleToStartMs: number[];
  /** The messages of the install's own stream, in order (which path ran, what failed). */
  messages: string[];
}

export interface BatchResult {
  wallSeconds: number;
  runs: InstallRun[];
  failures: number;
  distinctVmids: number;
}

const OSES: Array<[string, string]> = [['debian', '12'], ['ubuntu', '24.04'], ['rockylinux', '9']];

/** Retries what a loaded machine lets time out (a query no worker picked up in time). */
async function patiently<T>(fn: () => Promise<T>, attempts = 5): Promise<T | undefined> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts) {
        console.warn(`  (gave up after ${attempts} attempts: ${(err as Error).message})`);
        return undefined;
      }
      await new Promise((r) => setTimeout(r, 1000 * i));
    }
  }
}

/** Each event's recording time in the workflow, by sequence number. */
async function recordedAt(client: Client, workflowId: string): Promise<Map<number, number>> {
  const handle = client.workflow.getHandle(workflowId);
  const at = new Map<number, number>();
  let cursor = 0;
  for (;;) {
    const page = await handle.query(progressQuery, cursor);
    for (const e of page.events) if (e.at !== undefined) at.set(e.seq, e.at);
    cursor = page.events.at(-1)?.seq ?? cursor;
    if (page.events.length === 0 || cursor >= page.lastSeq) return at;
  }
}

function succeeded(s: WatchedStream): boolean {
  return s.closed && !s.arrivals.some((e) => e.status === 'error') && /^\[\*\] User: /.test(s.arrivals.at(-1)?.message ?? '');
}

/**
 * `count` installs started at once, each followed by its own stream (the POST) and
 * `watchers - 1` more streams re-attached to it with GET .../events as soon as it starts.
 */
export async function installBatch(opts: {
  url: string;
  client: Client;
  count: number;
  watchers?: number;
  node?: string;
  osIndex?: number;
  /** More fields of every install's body (e.g. `source`). */
  body?: Record<string, unknown>;
  /** How long one install's stream may take (the stream client's default otherwise: 10 min). */
  timeoutMs?: number;
  /** Told each install's workflow id as soon as it starts, and when its stream has closed. */
  onStart?: (workflowId: string) => void;
  onEnd?: (workflowId: string) => void;
  /** Runs once every stream has closed, before the installs are read back. */
  beforeReadBack?: () => void | Promise<void>;
}): Promise<BatchResult> {
  const t0 = Date.now();
  const watched = await Promise.all(
    Array.from({ length: opts.count }, async (_, i) => {
      const [os, version] = OSES[((opts.osIndex ?? 0) + i) % OSES.length];
      const started = Date.now();
      const extra: Array<Promise<WatchedStream>> = [];
      const own = await watch(`${opts.url}/api/vm/install`, {
        body: { os, version, ...(opts.node ? { node: opts.node } : {}), ...opts.body },
        timeoutMs: opts.timeoutMs,
        onOpen: (id) => {
          opts.onStart?.(id);
          for (let w = 1; w < (opts.watchers ?? 1); w++) extra.push(watch(`${opts.url}/api/workflows/${id}/events`));
        },
      });
      const seconds = (Date.now() - started) / 1000;
      opts.onEnd?.(own.workflowId);
      const others = await Promise.all(extra);
      return { own, others, seconds };
    }),
  );
  const wallSeconds = (Date.now() - t0) / 1000;
  await opts.beforeReadBack?.();
  // Read back only once every stream has closed: each read of a finished install replays
  // its history in the worker, which would slow the installs still running.
  const runs: InstallRun[] = [];
  for (const { own, others, seconds } of watched) {
    const at = (await patiently(() => recordedAt(opts.client, own.workflowId))) ?? new Map<number, number>();
    const latenciesMs = own.arrivals.flatMap((e) => (at.has(e.id) ? [e.at - at.get(e.id)!] : []));
    const history = await patiently(() => opts.client.workflow.getHandle(own.workflowId).fetchHistory());
    const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(own.arrivals.find((e) => e.message.startsWith('[*] VMID: '))?.message ?? '')?.[1]);
    const run: InstallRun = {
      workflowId: own.workflowId,
      ok: succeeded(own) && others.every(succeeded),
      vmid: Number.isFinite(vmid) ? vmid : undefined,
      seconds,
      latenciesMs,
      historyEvents: history?.events?.length ?? 0,
      billable: billableEvents(history ?? {}),
      workflowTasks: (history?.events ?? []).filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).length,
      scheduleToStartMs: history ? spansOf(history).map((a) => a.start - a.scheduled) : [],
      messages: own.arrivals.map((e) => e.message),
    };
    runs.push(run);
  }
  const vmids = new Set(runs.filter((r) => r.ok && r.vmid !== undefined).map((r) => r.vmid));
  return { wallSeconds, runs, failures: runs.filter((r) => !r.ok).length, distinctVmids: vmids.size };
}
