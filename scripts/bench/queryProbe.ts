import type { Client } from '@temporalio/client';
import { progressQuery } from '../../contract';

/**
 * Round trips of the progress query (client → Temporal → worker → back) while installs
 * run: the floor under the event latency a polling reader can reach. Only running installs
 * are asked, as a stream's reader would: a finished one is answered by replaying its history.
 */
export function probeQueries(client: Client, everyMs = 250) {
  let ids: string[] = [];
  const rtts: number[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const id = ids[Math.floor(Math.random() * ids.length)];
      if (id) {
        const t0 = performance.now();
        // Asks for events after a sequence number no workflow reaches: an empty page.
        const ok = await client.workflow.getHandle(id).query(progressQuery, Number.MAX_SAFE_INTEGER).then(() => true, () => false);
        if (ok) rtts.push(performance.now() - t0);
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    add: (id: string) => ids.push(id),
    remove: (id: string) => (ids = ids.filter((i) => i !== id)),
    async stop(): Promise<number[]> {
      running = false;
      await done;
      return rtts;
    },
  };
}
