import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import * as lifecycle from '../../workflows/lifecycle';
import { progressQuery, vmWorkflowId } from '../../contract';
import { loadConfig } from '../../lib/config';
import { createWorker } from '../../worker/worker';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

/**
 * The service's own worker (worker/worker.ts) with a small workflow cache: runs beyond it
 * are evicted and replayed from their history when asked again, and every run checks its
 * input with the zod instance the bundle preloads once for all of them.
 */
let t: WorkflowTestEnv;
let worker: Worker;
let running: Promise<void>;
let taskQueue: string;
const cluster = new FakeCluster();

describeWorkflows('the worker\'s workflow cache (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
    taskQueue = `${t.taskQueue}-cache`;
    const config = loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '2', TEMPORAL_TASK_QUEUE: taskQueue });
    worker = await createWorker({
      config,
      connection: t.env.nativeConnection,
      activities: cluster.activities(),
      workflowBundlePath: process.env.WORKFLOW_TEST_BUNDLE,
    });
    running = worker.run();
  });
  afterAll(async () => {
    if (worker?.getState() === 'RUNNING') worker.shutdown();
    await running;
    await t?.teardown();
  });

  const stop = async (vmid: number) =>
    t.env.client.workflow.start(lifecycle.vmStop, { workflowId: vmWorkflowId(vmid), taskQueue, args: [await t.issue({ vmid })] });

  test('WORKER_MAX_CACHED_WORKFLOWS bounds the runs kept; an evicted run answers a query after its replay', async () => {
    const vmids = [141, 142, 143, 144, 145];
    for (const vmid of vmids) cluster.add({ vmid, owner: 'install-1', status: 'running' });
    for (const vmid of vmids) {
      const handle = await stop(vmid);
      await handle.result();
      // A query brings a finished run back into the cache, as a watching client does.
      expect((await handle.query(progressQuery, 0)).state).toBe('completed');
      expect(worker.getStatus().numCachedWorkflows).toBeLessThanOrEqual(2);
    }
    // The first run left the cache long ago: answering means replaying its whole history.
    const first = await t.env.client.workflow.getHandle(vmWorkflowId(141)).query(progressQuery, 0);
    expect(first.state).toBe('completed');
    expect(first.events.at(-1)?.message).toMatch(/^\[\+\] VM stopped successfully \(VM 141, /);
    expect(worker.getStatus().numCachedWorkflows).toBeLessThanOrEqual(2);
    for (const vmid of vmids) expect(cluster.vms.get(vmid)?.status).toBe('stopped');
  });

  test('input checks work on the shared zod: a bad input fails with zod\'s own message', async () => {
    const handle = await t.env.client.workflow.start(lifecycle.vmStop, {
      workflowId: vmWorkflowId(146),
      taskQueue,
      args: [{ vmid: 146, extra: true } as unknown as { vmid: number }],
    });
    const err = await handle.result().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidRequestError');
    expect(cause.message).toBe('invalid input for vmStop: input: Unrecognized key: "extra"');
  });
});
