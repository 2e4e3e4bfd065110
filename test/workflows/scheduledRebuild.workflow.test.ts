import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { scheduledRebuild } from '../../workflows/scheduledRebuild';
import { vmStart } from '../../workflows/lifecycle';
import { type Activities, type InstallSpec, vmWorkflowId } from '../../contract';
import { FakeCluster, untilCancelled } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

const recorded: InstallSpec = { os: 'ubuntu', version: '24.04', vmid: 120, name: 'ci', cores: 2, ramMb: 2048, diskGb: 20, user: 'admin' };
let t: WorkflowTestEnv;
let n = 0;

/**
 * The test server has no Schedules, so each test starts the workflow a schedule would
 * start, with an id like the one a schedule gives it.
 */
function runScheduled(acts: Activities) {
  return t.withActivities(acts, () =>
    t.env.client.workflow
      .execute(scheduledRebuild, { workflowId: `rebuild-120-2026-12-01T03:00:0${++n}Z`, taskQueue: t.taskQueue, args: [{ vmid: 120 }] })
      .then(
        (result) => ({ result, err: undefined }),
        (err: unknown) => ({ result: undefined, err }),
      ),
  );
}

function withWeb(): FakeCluster {
  const cluster = new FakeCluster();
  cluster.add({ vmid: 120, name: 'ci-120', owner: 'install-old', status: 'running', spec: recorded });
  return cluster;
}

describeWorkflows('scheduledRebuild (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test("rebuilds the VM under the VM's own workflow id", async () => {
    const cluster = withWeb();
    const { result, err } = await runScheduled(cluster.activities());

    expect(err).toBeUndefined();
    expect(result).toMatchObject({ outcome: 'rebuilt', vmid: 120, rebuildWorkflowId: 'vm-120', rebuild: { vmid: 120, name: 'ci-120', replacedOwner: 'install-old' } });
    expect(cluster.vms.get(120)?.owner).toMatch(/^vm-120-install-/);
  });

  test('skips, naming what holds the VM, when another operation on it is running', async () => {
    const cluster = withWeb();
    const acts = cluster.activities({
      waitForSsh: untilCancelled,
      // As the real activity does: describe the workflow that holds vm-<vmid>.
      async runningVmOperation({ vmid }) {
        const d = await t.env.client.workflow.getHandle(vmWorkflowId(vmid)).describe();
        return { workflowId: d.workflowId, runId: d.runId, type: d.type, startTime: d.startTime.toISOString() };
      },
    });
    const { result, err } = await t.withActivities(acts, async () => {
      const start = await t.env.client.workflow.start(vmStart, {
        workflowId: vmWorkflowId(120),
        taskQueue: t.taskQueue,
        args: [await t.issue({ vmid: 120, ip: '10.10.0.120', user: 'ubuntu' })],
      });
      await cluster.called('waitForSsh');
      try {
        return await runScheduled(acts);
      } finally {
        await start.cancel();
        await start.result().catch(() => undefined);
      }
    });

    expect(err).toBeUndefined();
    expect(result).toMatchObject({ outcome: 'skipped', vmid: 120, runningWorkflowId: 'vm-120', runningType: 'vmStart' });
    expect(result?.outcome === 'skipped' && result.reason).toMatch(/^VM 120 is busy: vmStart \(workflow vm-120, started .*\) is running$/);
    expect(cluster.sequence()).not.toContain('inspectRebuildTarget');
    expect(cluster.vms.get(120)?.owner).toBe('install-old');
  });

  test('skips without failing (so the schedule is not paused) while the VM is still being installed', async () => {
    const cluster = withWeb();
    const acts = cluster.activities({
      async inspectRebuildTarget() {
        throw ApplicationFailure.nonRetryable('VM 120 (ci-120) is still being built by installVm (workflow install-old)', 'VmBusyError');
      },
    });
    const { result, err } = await runScheduled(acts);

    expect(err).toBeUndefined();
    expect(result).toMatchObject({ outcome: 'skipped', vmid: 120 });
    expect(result?.outcome === 'skipped' && result.reason).toMatch(/still being built by installVm/);
    expect(cluster.sequence()).toEqual(['inspectRebuildTarget']);
  });

  test('fails, with the cause and what became of the VM, when the rebuild fails', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 120, owner: 'made-by-hand' });
    const { err } = await runScheduled(cluster.activities());

    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('NotOwnedError');
    expect(cause.message).toMatch(/^rebuild of VM 120 failed: .*\(nothing was destroyed\)$/);
    expect(cluster.vms.get(120)?.owner).toBe('made-by-hand');
  });
});
