import { ApplicationFailure, Client, WorkflowFailedError } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';
import * as lifecycle from '../../workflows/lifecycle';
import { type Activities, progressQuery, type VmOperationResult, vmWorkflowId, WORKFLOW_TYPE_FIELD } from '../../contract';
import { VmStateError } from '../../lib/proxmox/errors';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, FAKE_INSTANCE, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';
import { INPUT_LIFETIME_MS } from '../../workflows/issuedCommand';

const GiB = 1024 ** 3;
let t: WorkflowTestEnv;

/** Runs one operation under the VM's own workflow id, its input issued now, as the API does. */
async function operate<I extends { vmid: number }>(cluster: FakeCluster, workflow: (input: I) => Promise<unknown>, input: I, acts?: Activities) {
  return t.withActivities(acts ?? cluster.activities(), async () => {
    const handle = await t.env.client.workflow.start(workflow.name, {
      workflowId: vmWorkflowId(input.vmid),
      taskQueue: t.taskQueue,
      args: [await t.issue(input)],
    });
    const outcome = await handle.result().then(
      (result) => ({ result: result as VmOperationResult, err: undefined }),
      (err: unknown) => ({ result: undefined, err }),
    );
    return { ...outcome, page: await handle.query(progressQuery, 0) };
  });
}

describeWorkflows('VM operations (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  const guest = { vmid: 130, ip: '10.10.0.130', user: 'debian' };
  const cases: Array<{
    workflow: Workflow;
    input: { vmid: number } & Record<string, unknown>;
    calls: Array<keyof Activities>;
    done: string;
    status?: 'running' | 'stopped';
  }> = [
    { workflow: lifecycle.vmStart, input: guest, calls: ['startVm', 'waitForSsh'], done: 'VM started successfully', status: 'running' },
    { workflow: lifecycle.vmReboot, input: guest, calls: ['rebootVm', 'waitForSsh'], done: 'VM rebooted successfully' },
    // A DHCP VM the API could not ask for its address (stopped): the guest agent tells, once it runs.
    { workflow: lifecycle.vmStart, input: { vmid: 130, user: 'debian' }, calls: ['startVm', 'readGuestAddress', 'waitForSsh'], done: 'VM started successfully', status: 'running' },
    { workflow: lifecycle.vmShutdown, input: { vmid: 130 }, calls: ['shutdownVm'], done: 'VM shut down successfully', status: 'stopped' },
    { workflow: lifecycle.vmStop, input: { vmid: 130 }, calls: ['stopVm'], done: 'VM stopped successfully', status: 'stopped' },
    { workflow: lifecycle.vmSetCpu, input: { vmid: 130, cores: 4 }, calls: ['setCpu'], done: 'VM now has 4 vCPU core(s)' },
    { workflow: lifecycle.vmSetMemory, input: { vmid: 130, memoryMb: 4096 }, calls: ['setMemory'], done: 'VM now has 4096 MB of memory' },
    { workflow: lifecycle.vmMigrate, input: { vmid: 130, from: 'pve1', target: 'pve2' }, calls: ['migrateVm'], done: 'VM migrated to pve2 successfully' },
  ];

  test.each(cases)('$workflow.name runs $calls and reports what it did', async ({ workflow, input, calls, done, status }) => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1', status: workflow === lifecycle.vmStart ? 'stopped' : 'running' });
    const { result, err, page } = await operate(cluster, workflow, input);

    expect(err).toBeUndefined();
    expect(result).toMatchObject({ vmid: 130, operation: workflow.name });
    expect(cluster.sequence()).toEqual(calls);
    if (status) expect(cluster.vms.get(130)?.status).toBe(status);
    expect(page.state).toBe('completed');
    expect(page.events[0].message).toBe(`[*] workflow id: ${vmWorkflowId(130)}`);
    expect(page.events.at(-1)).toMatchObject({ status: 'info' });
    expect(page.events.at(-1)?.message).toMatch(new RegExp(`^\\[\\+\\] ${done.replace(/[()]/g, '\\$&')} \\(VM 130, `));
  });

  test('vmMigrate reports the node the VM is on now', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
    const { result } = await operate(cluster, lifecycle.vmMigrate, { vmid: 130, from: 'pve1', target: 'pve2' });
    expect(result?.node).toBe('pve2');
    expect(cluster.vms.get(130)?.node).toBe('pve2');
  });

  test('vmDestroy purges the VM', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
    const { result } = await operate(cluster, lifecycle.vmDestroy, { vmid: 130 });
    expect(result?.operation).toBe('vmDestroy');
    expect(cluster.vms.has(130)).toBe(false);
  });

  test('vmSetDisk resizes to an absolute size, so a retried resize cannot grow the disk twice', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1' });
    let failOnce = true;
    const acts = cluster.activities({
      async growDisk() {
        // The first attempt times out after Proxmox already resized: the retry must ask for the same size.
        if (failOnce) {
          failOnce = false;
          throw new Error('ssh: connection reset');
        }
      },
    });
    const { result, err } = await operate(cluster, lifecycle.vmSetDisk, { vmid: 130, disk: 'scsi0', incrementGb: 5 }, acts);

    expect(err).toBeUndefined();
    expect(result?.sizeBytes).toBe(15 * GiB);
    expect(cluster.inputs('growDisk')).toEqual([
      { vmid: 130, disk: 'scsi0', sizeBytes: 15 * GiB, instance: FAKE_INSTANCE },
      { vmid: 130, disk: 'scsi0', sizeBytes: 15 * GiB, instance: FAKE_INSTANCE },
    ]);
  });

  test('vmSetDisk refuses to grow past VM_MAX_DISK before touching the disk', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1' });
    const { err, page } = await operate(cluster, lifecycle.vmSetDisk, { vmid: 130, disk: 'scsi0', incrementGb: 20, maxDiskGb: 16 });

    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidRequestError');
    expect(cause.message).toBe('scsi0 would grow from 10G to 30G, over VM_MAX_DISK (16G)');
    expect(cluster.sequence()).toEqual(['diskSize']);
    expect(page.state).toBe('failed');
  });

  test('a failing step fails the operation with the activity\'s own message, without retrying what cannot heal', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1', status: 'running' });
    const acts = cluster.activities({
      async startVm() {
        throw new VmStateError({ command: 'qm start 130', node: 'pve1', exitCode: 255, stderr: 'VM 130 already running' });
      },
    });
    const { err, page } = await operate(cluster, lifecycle.vmStart, guest, acts);

    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(cluster.sequence()).toEqual(['startVm']);
    expect(page.state).toBe('failed');
    expect(page.events.at(-1)).toMatchObject({ step: 'VM start > start', status: 'error' });
    expect(page.events.at(-1)?.message).toContain('VM 130 already running');
  });

  test('an input that names another workflow type, or none, fails the run before its first step', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 130, owner: 'install-1', status: 'running' });
    // A client without the service's interceptor writes no type; one input names vmStop.
    const bare = new Client({ connection: t.env.connection, namespace: t.env.namespace });
    const runs = [
      { client: bare, input: { vmid: 130 }, refused: /names no workflow type for workflow type vmDestroy/ },
      { client: bare, input: { vmid: 130, [WORKFLOW_TYPE_FIELD]: 'vmStop' }, refused: /written for workflow type "vmStop" given to workflow type vmDestroy/ },
    ];
    for (const { client, input, refused } of runs) {
      const err = await t.withActivities(cluster.activities(), async () => {
        const handle = await client.workflow.start(lifecycle.vmDestroy, { workflowId: vmWorkflowId(130), taskQueue: t.taskQueue, args: [input as { vmid: number }] });
        return handle.result().then(() => undefined, (e: unknown) => e);
      });
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('InvalidRequestError');
      expect(cause.nonRetryable).toBe(true);
      expect(cause.message).toMatch(refused);
    }
    expect(cluster.sequence()).toEqual([]);
  });

  describe('a command input is good for its own workflow id, for a few minutes', () => {
    /**
     * A recorded input started as it is under `workflowId`: the failure of a run refused
     * before its first step (like a malformed input, before it keeps progress), nothing called.
     */
    async function refused<I extends { vmid: number }>(cluster: FakeCluster, workflow: (input: I) => Promise<unknown>, input: I, workflowId = vmWorkflowId(input.vmid)) {
      const err = await t.withActivities(cluster.activities(), async () => {
        const handle = await t.env.client.workflow.start(workflow.name, { workflowId, taskQueue: t.taskQueue, args: [input] });
        return handle.result().then(() => undefined, (e: unknown) => e);
      });
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.nonRetryable).toBe(true);
      expect(cluster.sequence()).toEqual([]);
      return cause;
    }

    test('an input started again after INPUT_LIFETIME_MS is refused, nothing called', async () => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'running' });
      const recorded = await t.issue({ vmid: 130 });
      await t.env.sleep(INPUT_LIFETIME_MS + 60_000);
      const cause = await refused(cluster, lifecycle.vmStop, recorded);
      expect(cause.type).toBe('StaleCommandError');
      expect(cause.message).toMatch(/commands expire 5 minutes after the API issued them/);
      expect(cluster.vms.get(130)?.status).toBe('running');
    });

    test('an input issued for vm-130 is refused under another workflow id (outside the per-VM lock)', async () => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
      const issued = await t.issue({ vmid: 130 });
      const cause = await refused(cluster, lifecycle.vmDestroy, issued, `vm-130-${Date.now()}`);
      expect(cause.type).toBe('StaleCommandError');
      expect(cause.message).toMatch(/issued for workflow vm-130 under workflow vm-130-\d+/);
      expect(cluster.vms.has(130)).toBe(true);
    });

    test('an input from before issues (no issuedAt, issuedFor, instance) is refused on a new start', async () => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
      const cause = await refused(cluster, lifecycle.vmDestroy, { vmid: 130 });
      expect(cause.type).toBe('StaleCommandError');
      const noInstance = await refused(cluster, lifecycle.vmSetCpu, { vmid: 130, cores: 2, issuedAt: await t.env.currentTimeMs(), issuedFor: 'vm-130' });
      expect(noInstance.message).toMatch(/names no VM instance/);
      expect(cluster.vms.has(130)).toBe(true);
    });

    test('an input issued far ahead of the run is refused like a stale one', async () => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'running' });
      const ahead = await t.issue({ vmid: 130 });
      const cause = await refused(cluster, lifecycle.vmStop, { ...ahead, issuedAt: ahead.issuedAt! + INPUT_LIFETIME_MS + 60_000 });
      expect(cause.type).toBe('StaleCommandError');
    });

    test('every activity of an operation is given the instance the command names', async () => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
      await operate(cluster, lifecycle.vmDestroy, { vmid: 130 });
      expect(cluster.inputs('destroyVm')).toEqual([{ vmid: 130, instance: FAKE_INSTANCE }]);
    });
  });
});
