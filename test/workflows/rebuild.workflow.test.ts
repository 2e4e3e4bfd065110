import { ApplicationFailure, CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import { vmRebuild } from '../../workflows/rebuild';
import {
  type Activities,
  type InstallSpec,
  progressQuery,
  type RebuildInput,
  VM_ID,
  VM_NAME,
  VM_OPERATION,
  vmWorkflowId,
} from '../../contract';
import { StorageError } from '../../lib/proxmox/errors';
import { FakeCluster, untilCancelled } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

const recorded: InstallSpec = { os: 'debian', version: '12', vmid: 120, name: 'web', cores: 2, ramMb: 2048, diskGb: 20, user: 'admin' };
let t: WorkflowTestEnv;

/** A cluster holding VM 120, installed by QemuRun as `web-120` (or `120-120`, unnamed) and running. */
function installedWeb(name?: string): FakeCluster {
  const cluster = new FakeCluster();
  cluster.add({ vmid: 120, name: `${name ?? 120}-120`, owner: 'install-old', status: 'running', spec: { ...recorded, name } });
  return cluster;
}

async function rebuild(acts: Activities, input: RebuildInput = { vmid: 120 }, during?: (handle: { cancel(): Promise<unknown> }) => Promise<void>) {
  return t.withActivities(acts, async () => {
    const handle = await t.env.client.workflow.start(vmRebuild, { workflowId: vmWorkflowId(input.vmid), taskQueue: t.taskQueue, args: [await t.issue(input)] });
    await during?.(handle);
    const outcome = await handle.result().then(
      (result) => ({ result, err: undefined }),
      (err: unknown) => ({ result: undefined, err }),
    );
    const page = await handle.query(progressQuery, 0);
    // The install child's id is in the rebuild's events, whether it finished or not.
    const childId = page.events.map((e) => /install workflow (\S+) started/.exec(e.message)?.[1]).find(Boolean);
    const child = childId ? await t.env.client.workflow.getHandle(childId).describe() : undefined;
    return { ...outcome, page, child };
  });
}

describeWorkflows('vmRebuild (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test('stops and destroys the VM it owns, then re-installs it with the same VMID and name', async () => {
    const cluster = installedWeb('web');
    const { result, err, page, child } = await rebuild(cluster.activities());

    expect(err).toBeUndefined();
    expect(result).toMatchObject({ vmid: 120, name: 'web-120', replacedOwner: 'install-old' });
    expect(result?.installWorkflowId).toMatch(/^vm-120-install-/);
    // The password the VM has now is read before the VM is destroyed, so the rebuild keeps it.
    expect(cluster.sequence().slice(0, 5)).toEqual(['inspectRebuildTarget', 'initRootPassword', 'keptCiPassword', 'stopOwnedVm', 'destroyOwnedVm']);
    expect(cluster.inputs('destroyOwnedVm')).toEqual([{ vmid: 120, owner: 'install-old' }]);
    expect(cluster.inputs('allocateVmid')).toEqual([]);
    expect(cluster.inputs('createVm')).toMatchObject([{ vmid: 120, name: 'web-120', owner: result?.installWorkflowId }]);
    expect(cluster.vms.get(120)).toMatchObject({ owner: result?.installWorkflowId, status: 'running' });
    expect(child?.workflowId).toBe(result?.installWorkflowId);
    expect(child?.status.name).toBe('COMPLETED');
    expect(page.state).toBe('completed');
  });

  test.each([
    ['web', 'web-120'],
    [undefined, '120-120'],
  ])("the install child is findable by the VM's full name from its start (name %s: VmName %s)", async (name, fullName) => {
    // The install fails before qm create, so the child never sets VmName itself: what it
    // carries is what the rebuild started it with.
    const cluster = installedWeb(name);
    const acts = cluster.activities({
      async checkStorage() {
        throw new StorageError({ command: 'pvesm status', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' does not exist" });
      },
    });
    const { err, child } = await rebuild(acts);

    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(child?.status.name).toBe('FAILED');
    expect(cluster.inputs('createVm')).toEqual([]);
    expect(child?.typedSearchAttributes.get(VM_NAME)).toBe(fullName);
    expect(child?.typedSearchAttributes.get(VM_ID)).toBe(120);
    expect(child?.typedSearchAttributes.get(VM_OPERATION)).toBe('install');
  });

  test('an install that fails after the destroy says the VM is gone and not re-created', async () => {
    const cluster = installedWeb('web');
    const acts = cluster.activities({
      async checkStorage() {
        throw new StorageError({ command: 'pvesm status', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' does not exist" });
      },
    });
    const { err, page } = await rebuild(acts);

    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('StorageError');
    expect(cause.message).toMatch(/storage 'local-lvm' does not exist.*\(VM 120 was destroyed and has not been re-created\)$/);
    expect(cluster.vms.has(120)).toBe(false);
    expect(page.state).toBe('failed');
    expect(page.events.at(-1)?.status).toBe('error');
  });

  test('refuses a VM QemuRun did not install before touching anything', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 120, owner: 'made-by-hand' }); // no spec marker
    const { err, child } = await rebuild(cluster.activities());

    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('NotOwnedError');
    expect(cause.message).toMatch(/\(nothing was destroyed\)$/);
    expect(cluster.sequence()).toEqual(['inspectRebuildTarget']);
    expect(cluster.vms.get(120)?.owner).toBe('made-by-hand');
    expect(child).toBeUndefined();
  });

  test('a missing VM with a spec given is installed from that spec', async () => {
    const cluster = new FakeCluster();
    const { result } = await rebuild(cluster.activities(), { vmid: 140, spec: { ...recorded, vmid: 140, name: 'db' } });

    expect(result).toMatchObject({ vmid: 140, name: 'db-140' });
    expect(result?.replacedOwner).toBeUndefined();
    expect(cluster.sequence()).not.toContain('stopOwnedVm');
    expect(cluster.sequence()).not.toContain('destroyOwnedVm');
    expect(cluster.vms.get(140)?.owner).toBe(result?.installWorkflowId);
  });

  test('cancelling a rebuild cancels its install, which removes the VM it had created', async () => {
    const cluster = installedWeb('web');
    const acts = cluster.activities({ waitForSsh: untilCancelled });
    const { err, page, child } = await rebuild(acts, { vmid: 120 }, async (handle) => {
      await cluster.called('waitForSsh');
      await handle.cancel();
    });

    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(child?.status.name).toBe('CANCELLED');
    expect(cluster.inputs('destroyOwnedVm')).toEqual([
      { vmid: 120, owner: 'install-old' },
      { vmid: 120, owner: child?.workflowId, run: child?.runId },
    ]);
    expect(cluster.vms.has(120)).toBe(false);
    expect(page.state).toBe('cancelled');
  });
});
