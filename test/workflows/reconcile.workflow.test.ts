import { reconcileVms } from '../../workflows/reconcile';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

let t: WorkflowTestEnv;
let n = 0;

/** A cluster with one VM per case the reconciler tells apart. */
function mixed(): FakeCluster {
  const cluster = new FakeCluster();
  cluster.add({ vmid: 120, owner: 'install-done' });
  cluster.owners.set('install-done', 'COMPLETED');
  cluster.add({ vmid: 121, owner: 'install-killed', status: 'stopped' });
  cluster.owners.set('install-killed', 'TERMINATED');
  cluster.add({ vmid: 122, owner: 'install-busy' });
  cluster.owners.set('install-busy', 'RUNNING');
  cluster.add({ vmid: 123, owner: 'install-lost' }); // unknown to the namespace
  cluster.add({ vmid: 124, owner: 'by-hand', marked: false });
  cluster.add({ vmid: 125, owner: 'install-failed' });
  cluster.owners.set('install-failed', 'FAILED');
  return cluster;
}

function run(cluster: FakeCluster, dryRun: boolean) {
  return t.withActivities(cluster.activities(), () =>
    t.env.client.workflow.execute(reconcileVms, { workflowId: `reconcile-test-${++n}`, taskQueue: t.taskQueue, args: [{ dryRun }] }),
  );
}

describeWorkflows('reconcileVms (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test('removes the VMs of terminated, failed and unknown owners, through destroyOwnedVm with their owner', async () => {
    const cluster = mixed();
    const result = await run(cluster, false);

    expect(result.removed).toEqual([121, 123, 125]);
    expect(result.failed).toEqual([]);
    expect(cluster.inputs('destroyOwnedVm')).toEqual([
      { vmid: 121, owner: 'install-killed' },
      { vmid: 123, owner: 'install-lost' },
      { vmid: 125, owner: 'install-failed' },
    ]);
    expect([...cluster.vms.keys()].sort()).toEqual([120, 122, 124]);
    const byId = Object.fromEntries(result.vms.map((v) => [v.vmid, v]));
    expect(byId[120]).toMatchObject({ action: 'keep', reason: 'its owner install-done completed' });
    expect(byId[121]).toMatchObject({ action: 'removed', ownerState: 'TERMINATED', reason: 'its owner install-killed closed as terminated' });
    expect(byId[122]).toMatchObject({ action: 'keep', reason: 'its owner install-busy is running' });
    expect(byId[124]).toMatchObject({ action: 'keep' });
    expect(byId[124].owner).toBeUndefined();
  });

  test('a dry run reports the same verdicts and removes nothing', async () => {
    const cluster = mixed();
    const result = await run(cluster, true);

    expect(result.dryRun).toBe(true);
    expect(result.vms.filter((v) => v.action === 'remove').map((v) => v.vmid)).toEqual([121, 123, 125]);
    expect(result.removed).toEqual([]);
    expect(cluster.sequence()).toEqual(['planReconcile', 'planLeaseRelease']);
    expect(cluster.vms.size).toBe(6);
  });

  test('an unknown owner of a VM older than the retention says nothing: the VM is kept', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-long-ago', ageSec: 2 * 86400 });
    cluster.add({ vmid: 131, owner: 'install-just-now', ageSec: 600 });
    const result = await run(cluster, false);

    expect(result.removed).toEqual([131]);
    expect(result.vms.find((v) => v.vmid === 130)).toMatchObject({
      action: 'keep',
      ownerState: 'UNKNOWN_TO_NAMESPACE',
      reason: expect.stringContaining("older than the namespace's retention (1d)"),
    });
    expect(cluster.vms.has(130)).toBe(true);
  });

  test('a VM gone (or re-owned) by the time of removal is reported, not counted as removed', async () => {
    const cluster = mixed();
    const plain = cluster.plain();
    const acts = cluster.activities({
      async planReconcile() {
        const plan = await plain.planReconcile();
        cluster.vms.delete(121); // someone destroyed it meanwhile
        return plan;
      },
    });
    const result = await t.withActivities(acts, () =>
      t.env.client.workflow.execute(reconcileVms, { workflowId: `reconcile-test-${++n}`, taskQueue: t.taskQueue, args: [{}] }),
    );
    expect(result.removed).toEqual([123, 125]);
    expect(result.vms.find((v) => v.vmid === 121)).toMatchObject({ action: 'gone' });
  });
});
