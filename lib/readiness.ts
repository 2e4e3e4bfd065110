import type { ProxmoxNode } from './proxmox/node';
import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { NodeExecutor } from './executor/types';
import { reason } from './startupError';

/**
 * Readiness: whether this process can do its job right now, as opposed to liveness (it
 * answers HTTP at all). Each dependency is checked on every call, with a short deadline, so
 * the answer is never older than the request: Temporal (the frontend answers), the worker
 * (still polling) and every Proxmox node (a trivial command runs there).
 */

export interface ReadinessCheck {
  /** How the dependency is named in answers: "Temporal", "worker", "node pve2". */
  name: string;
  check(): Promise<void>;
}

export interface ReadinessReport {
  ready: boolean;
  /** `up`, or why not. */
  checks: Record<string, string>;
  /** Only when not ready: "not ready: Temporal (127.0.0.1:7233) is down: …". */
  message?: string;
}

const CHECK_TIMEOUT_MS = 3000;

export function temporalCheck(client: Client, address: string): ReadinessCheck {
  return {
    name: `Temporal (${address})`,
    check: () =>
      client.connection.withDeadline(Date.now() + CHECK_TIMEOUT_MS, async () => {
        await client.connection.workflowService.getSystemInfo({});
      }),
  };
}

export function workerCheck(worker: Worker): ReadinessCheck {
  return {
    name: 'worker',
    check: async () => {
      const state = worker.getState();
      if (state !== 'RUNNING') throw new Error(`state ${state}`);
    },
  };
}

export function nodeCheck(executor: NodeExecutor): ReadinessCheck {
  return {
    name: `node ${executor.node}`,
    check: async () => {
      const { exitCode } = await executor.run(['true'], { timeoutMs: CHECK_TIMEOUT_MS });
      if (exitCode !== 0) throw new Error(`'true' exited with ${exitCode}`);
    },
  };
}

/** API mode: the main node's API answers `/version` with the token. */
export function apiCheck(node: Pick<ProxmoxNode, 'node' | 'version'>): ReadinessCheck {
  return {
    name: `proxmox api (${node.node})`,
    check: async () => {
      await node.version({ timeoutMs: CHECK_TIMEOUT_MS });
    },
  };
}

/**
 * The readiness endpoint needs no credentials, so callers arriving together share one round
 * of checks, and a report is reused for `maxAgeMs`: polling it cannot flood the nodes.
 */
export function readinessProbe(checks: ReadinessCheck[], maxAgeMs = 1000): () => Promise<ReadinessReport> {
  let last: { at: number; report: Promise<ReadinessReport> } | undefined;
  return () => {
    if (!last || Date.now() - last.at > maxAgeMs) {
      const round = { at: Infinity, report: checkReadiness(checks) };
      // Fresh from when it ends: a slow round is not reused as if it were new.
      void round.report.then(() => (round.at = Date.now()));
      last = round;
    }
    return last.report;
  };
}

export async function checkReadiness(checks: ReadinessCheck[]): Promise<ReadinessReport> {
  const results = await Promise.all(
    checks.map(async (c) => {
      try {
        await c.check();
        return [c.name, 'up'] as const;
      } catch (err) {
        return [c.name, `down: ${reason(err).split('\n')[0].slice(0, 200)}`] as const;
      }
    }),
  );
  const down = results.filter(([, state]) => state !== 'up');
  return {
    ready: down.length === 0,
    checks: Object.fromEntries(results),
    ...(down.length > 0 ? { message: `not ready: ${down.map(([name, state]) => `${name} is ${state}`).join('; ')}` } : {}),
  };
}
