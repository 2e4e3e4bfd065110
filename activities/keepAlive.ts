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
 */
export async function keepAlive<T>(work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  beat(ctx);
  const timer = setInterval(() => beat(ctx), EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
