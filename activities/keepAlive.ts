import { Context } from '@temporalio/activity';
import { beat } from './tasks';

const EVERY_MS = 10_000;

/**
 * Heartbeats while `work` runs, whether or not it prints anything. The heartbeat says
 * this worker is alive (a dead one is noticed within the activity's heartbeatTimeout);
 * it is not a progress report. Long commands go quiet for minutes (apt-get waiting on a
 * mirror, qemu-img allocating a volume), and without this a quiet minute looked like a
 * dead worker: Temporal started a second attempt while the first still ran. It is also
 * how a cancellation reaches the attempt.
 *
 * `heartbeating` below runs every activity in one, so none has to beat to stay alive, and
 * none calls it again (a second timer only doubles the beats). Those that do heartbeat by
 * themselves put what a retry resumes from in the beat, or beat once per step of a loop:
 * relayProgress its cursor (temporal.ts, which runs outside this timer), the guest waits
 * their attempt (guest.ts, guestAddress.ts), planReconcile the VM it reached
 * (reconcile.ts), the template conversion and retirement one beat per disk or template
 * (templates.ts). The timer's own beat keeps a Proxmox task's UPID (tasks.ts).
 */
export async function keepAlive<T>(work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  // Several beats per timeout: the SDK sends at most one per 0.8 timeout, and one late
  // beat must not look like a dead worker.
  const timeoutMs = ctx.info.heartbeatTimeoutMs;
  const every = timeoutMs ? Math.min(EVERY_MS, Math.max(500, Math.floor(timeoutMs / 4))) : EVERY_MS;
  // No beat at the start: Temporal counts the heartbeat timeout from the attempt's start
  // anyway, and most activities end in well under a second, so a first beat was a server
  // write per activity (~15 per install) that told Temporal nothing.
  const timer = setInterval(() => beat(ctx), every);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

type AsyncFunctions = Record<string, (...args: any[]) => Promise<unknown>>;

/**
 * Every activity in `activities`, heartbeating for as long as it runs. With a short
 * heartbeatTimeout in the workflow's activity options, a worker that dies mid-activity
 * (SIGKILL, a lost host) is noticed within seconds, not after the start-to-close timeout.
 */
export function heartbeating<T extends AsyncFunctions>(activities: T): T {
  return Object.fromEntries(
    Object.entries(activities).map(([name, fn]) => [
      name,
      // A named function keeps the activity's name in stack traces.
      { [name]: (...args: unknown[]) => keepAlive(() => fn(...args)) }[name],
    ]),
  ) as T;
}
