import { MockActivityEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { acquireSlotUpdate, releaseSlotUpdate, storageSlotsQuery, storageSlotsWorkflowId, type SlotAnswer, type StorageSlotsState } from '../../contract';
import { withStorageSlot } from '../../activities/storageSlots';
import type { Config } from '../../lib/config';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';
import { eventually } from '../../sandbox/testkit';

let t: WorkflowTestEnv;

/** A fresh slots workflow under its own storage name, so tests do not share holders. */
async function startSlots(storage: string, over: Partial<StorageSlotsState> = {}) {
  const handle = await t.env.client.workflow.start('storageSlots', {
    workflowId: storageSlotsWorkflowId(t.taskQueue, 'pve1', storage),
    taskQueue: t.taskQueue,
    args: [{ node: 'pve1', storage, holders: [], waiting: [], ...over } satisfies StorageSlotsState],
  });
  const acquire = (holder: string, limit = 2, ttlMs = 60_000) => handle.executeUpdate(acquireSlotUpdate, { args: [{ holder, limit, ttlMs }] });
  const release = (holder: string) => handle.executeUpdate(releaseSlotUpdate, { args: [{ holder }] });
  const slots = () => handle.query(storageSlotsQuery);
  return { handle, acquire, release, slots };
}

/** Polls `read` until `ok` holds (updates land asynchronously to the caller). */
async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string): Promise<T> {
  return eventually(async () => {
    const v = await read();
    if (!ok(v)) throw new Error(`never: ${what}`);
    return v;
  }, 10_000, 50);
}

describeWorkflows('storage slots workflow (time-skipping server)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test('5 holders on limit 2: two hold, three queue; each release lets exactly one more in', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { acquire, release, slots } = await startSlots('five');
      const granted: string[] = [];
      const holders = ['a', 'b', 'c', 'd', 'e'];
      const answers = holders.map((h) => acquire(h).then((answer) => (granted.push(h), answer)));
      let view = await until(slots, (s) => s.holders.length + s.waiting.length === 5 && granted.length === 2, 'two held, three waiting');
      expect(view.holders).toHaveLength(2);
      expect(view.waiting).toHaveLength(3);
      const queue = view.waiting;
      for (let round = 0; round < 3; round++) {
        const out = granted[round];
        expect(await release(out)).toBe(true);
        view = await until(slots, (s) => s.holders.length === 2 && s.waiting.length === 2 - round && granted.length === 3 + round, `round ${round}`);
        expect(view.holders.map((h) => h.holder)).not.toContain(out);
      }
      const results = await Promise.all(answers);
      expect(results.every((r) => r.held)).toBe(true);
      expect(new Set(granted).size).toBe(5);
      // The queue is served in order of arrival.
      expect(granted.slice(2)).toEqual(queue);
      for (const h of granted.slice(3)) await release(h);
      expect(await release('a-stranger')).toBe(false);
      expect((await slots()).holders).toEqual([]);
    });
  });

  test('a holder that asks again gets its slot back, and takes no second one', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { acquire, slots } = await startSlots('again');
      expect(await acquire('install-1/7', 1)).toEqual({ held: true, holders: 1 });
      const first = (await slots()).holders[0];
      expect(await acquire('install-1/7', 1)).toEqual({ held: true, holders: 1 });
      const view = await slots();
      expect(view.holders.map((h) => h.holder)).toEqual(['install-1/7']);
      expect(Date.parse(view.holders[0].since)).toBeGreaterThanOrEqual(Date.parse(first.since));
      // Refused by the validator: nothing of it reaches the history.
      const refused = async (p: Promise<unknown>) => ((await p.then(() => undefined, (e: unknown) => e)) as { cause?: Error }).cause?.message;
      expect(await refused(acquire('', 1))).toMatch(/^holder: /);
      expect(await refused(acquire('x', 0))).toMatch(/^limit: /);
    });
  });

  test('a slot its holder never releases is freed after its ttl, and the next in line gets it', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle, acquire, slots } = await startSlots('ttl');
      expect((await acquire('dead-worker', 1, 60_000)).held).toBe(true);
      let answered: SlotAnswer | undefined;
      const waiting = acquire('next', 1, 60_000).then((a) => (answered = a));
      await until(slots, (s) => s.waiting.includes('next'), 'next queued');
      await t.env.sleep(30_000);
      expect(answered).toBeUndefined();
      await t.env.sleep(31_000);
      expect(await waiting).toEqual({ held: true, holders: 1 });
      expect((await slots()).holders.map((h) => h.holder)).toEqual(['next']);
      // The dead holder's renewal, had it one, finds its slot gone, and queues for none.
      expect(await handle.executeUpdate(acquireSlotUpdate, { args: [{ holder: 'dead-worker', limit: 1, ttlMs: 60_000, renew: true }] })).toEqual({ held: false, reason: 'expired' });
      expect(await slots()).toMatchObject({ waiting: [] });
      expect(await handle.executeUpdate(acquireSlotUpdate, { args: [{ holder: 'next', limit: 1, ttlMs: 60_000, renew: true }] })).toEqual({ held: true, holders: 1 });
    });
  });

  test('continue-as-new carries the holders and the queue: waiters ask again and keep their places', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle, acquire, release, slots } = await startSlots('handover', { updatesPerRun: 4 });
      const firstRun = (await handle.describe()).runId;
      expect((await acquire('holder', 1)).held).toBe(true);
      const b = acquire('b', 1);
      await until(slots, (s) => s.waiting.length === 1, 'b queued');
      const c = acquire('c', 1);
      await until(slots, (s) => s.waiting.length === 2, 'c queued');
      // The fourth update ends the run: the waiters are told to ask the next one.
      expect((await acquire('holder', 1)).held).toBe(true);
      expect(await b).toEqual({ held: false, reason: 'continued-as-new' });
      expect(await c).toEqual({ held: false, reason: 'continued-as-new' });
      const next = await until(() => handle.describe(), (d) => d.runId !== firstRun && d.status.name === 'RUNNING', 'the next run');
      expect(next.runId).not.toBe(firstRun);
      expect(await slots()).toMatchObject({ holders: [expect.objectContaining({ holder: 'holder' })], waiting: ['b', 'c'] });
      // c asks first, b after: b's place is still ahead of c's.
      const order: string[] = [];
      const c2 = acquire('c', 1).then((a) => (order.push('c'), a));
      await new Promise((r) => setTimeout(r, 200));
      const b2 = acquire('b', 1).then((a) => (order.push('b'), a));
      await new Promise((r) => setTimeout(r, 200));
      expect(order).toEqual([]);
      await release('holder');
      expect((await b2).held).toBe(true);
      expect(order).toEqual(['b']);
      await release('b');
      expect((await c2).held).toBe(true);
    });
  });

  test('releases and acquires that reach the entity in one activation never grant more than the limit', async () => {
    // The entity's own task queue, served only while the test says so: the updates sent
    // while no worker polls reach the workflow together, in one activation, as they do
    // when a busy worker takes a while (or a handover has the waiters ask at once).
    const taskQueue = `${t.taskQueue}-one-activation`;
    const serve = async () => {
      // No sticky cache: the next worker finds the workflow task on the queue at once.
      const worker = await Worker.create({
        connection: t.env.nativeConnection,
        namespace: t.env.namespace,
        taskQueue,
        workflowBundle: { codePath: process.env.WORKFLOW_TEST_BUNDLE! },
        maxCachedWorkflows: 0,
      });
      const running = worker.run();
      return async () => {
        worker.shutdown();
        await running;
      };
    };
    // The server's clock runs ahead of this one (the ttl test above skipped a minute): a day's ttl outlives that.
    const ttlMs = 86_400_000;
    const since = new Date().toISOString();
    const claim = (holder: string) => ({ holder, since, ttlMs });
    const handle = await t.env.client.workflow.start('storageSlots', {
      workflowId: storageSlotsWorkflowId(t.taskQueue, 'pve1', 'one-activation'),
      taskQueue,
      // Two holding, three claims carried over from the last run.
      args: [{ node: 'pve1', storage: 'one-activation', holders: [claim('a'), claim('b')], waiting: [claim('c'), claim('d'), claim('e')] } satisfies StorageSlotsState],
    });
    let stop = await serve();
    try {
      expect((await handle.query(storageSlotsQuery)).holders).toHaveLength(2);
    } finally {
      await stop();
    }

    // A slot freed, a waiter asking, another slot freed, then waiters further up the queue asking.
    const sent: Array<Promise<unknown>> = [];
    const answers: Record<string, Promise<SlotAnswer>> = {};
    const send = async (what: 'release' | 'acquire', holder: string) => {
      const p =
        what === 'release'
          ? handle.executeUpdate(releaseSlotUpdate, { args: [{ holder }] })
          : (answers[holder] = handle.executeUpdate(acquireSlotUpdate, { args: [{ holder, limit: 2, ttlMs }] }));
      sent.push(p.catch(() => undefined));
      // In this order at the server.
      await new Promise((r) => setTimeout(r, 150));
    };
    await send('release', 'a');
    await send('acquire', 'e');
    await send('release', 'b');
    await send('acquire', 'd');
    await send('acquire', 'c');

    stop = await serve();
    try {
      const view = await until(() => handle.query(storageSlotsQuery), (v) => v.waiting.length + v.holders.length === 3, 'the activation handled');
      expect(view.holders.length).toBeLessThanOrEqual(2);
      expect(view.holders.map((h) => h.holder).sort()).toEqual(['d', 'e']);
      expect(view.waiting).toEqual(['c']);
      expect(await answers.e).toEqual({ held: true, holders: 2 });
      expect(await answers.d).toEqual({ held: true, holders: 2 });
      // c waits its turn, and gets it when one of them gives its slot back.
      await handle.executeUpdate(releaseSlotUpdate, { args: [{ holder: 'e' }] });
      expect(await answers.c).toEqual({ held: true, holders: 2 });
      await Promise.all(sent);
    } finally {
      await handle.terminate().catch(() => undefined);
      await stop();
    }
  });

  test('withStorageSlot: 5 activities on limit 2 run at most 2 at once, all finish, and every slot is given back', async () => {
    const config = { cloneConcurrency: 2, temporal: { taskQueue: t.taskQueue } } as unknown as Config;
    await t.withActivities(new FakeCluster().activities(), async () => {
      let running = 0;
      let most = 0;
      const clone = async (i: number) => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 300));
        running--;
        return i;
      };
      const results = await Promise.all(
        [0, 1, 2, 3, 4].map((i) =>
          new MockActivityEnvironment().run(() => withStorageSlot({ config, client: t.env.client }, { node: 'pve2', storage: 'helper', holder: `install-${i}/9` }, () => clone(i))),
        ),
      );
      expect(results).toEqual([0, 1, 2, 3, 4]);
      expect(most).toBe(2);
      const view = await t.env.client.workflow.getHandle(storageSlotsWorkflowId(t.taskQueue, 'pve2', 'helper')).query(storageSlotsQuery);
      expect(view).toMatchObject({ node: 'pve2', storage: 'helper', holders: [], waiting: [] });
      // A failing clone gives its slot back too.
      await expect(
        new MockActivityEnvironment().run(() =>
          withStorageSlot({ config, client: t.env.client }, { node: 'pve2', storage: 'helper', holder: 'install-x/9' }, async () => {
            throw new Error('clone failed');
          }),
        ),
      ).rejects.toThrow('clone failed');
      expect((await t.env.client.workflow.getHandle(storageSlotsWorkflowId(t.taskQueue, 'pve2', 'helper')).query(storageSlotsQuery)).holders).toEqual([]);
    });
  });

  test('withStorageSlot asks the next run when the entity continues as new while it waits', async () => {
    const config = { cloneConcurrency: 2, temporal: { taskQueue: t.taskQueue } } as unknown as Config;
    await t.withActivities(new FakeCluster().activities(), async () => {
      // Started before the activities (they find it: USE_EXISTING), with runs of 3 updates.
      const { handle } = await startSlots('short-runs', { updatesPerRun: 3 });
      const firstRun = (await handle.describe()).runId;
      let running = 0;
      let most = 0;
      const results = await Promise.all(
        [0, 1, 2, 3, 4, 5].map((i) =>
          new MockActivityEnvironment().run(() =>
            withStorageSlot({ config, client: t.env.client }, { node: 'pve1', storage: 'short-runs', holder: `install-${i}/3` }, async () => {
              most = Math.max(most, ++running);
              await new Promise((r) => setTimeout(r, 200));
              running--;
              return i;
            }),
          ),
        ),
      );
      expect(results).toEqual([0, 1, 2, 3, 4, 5]);
      expect(most).toBeLessThanOrEqual(2);
      expect((await handle.describe()).runId).not.toBe(firstRun);
      expect((await handle.query(storageSlotsQuery)).holders).toEqual([]);
    });
  });
});
