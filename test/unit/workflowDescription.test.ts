import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { installedDescription } from '../../contract';
import { reconcileActivities } from '../../activities/reconcile';
import { temporalActivities } from '../../activities/temporal';
import type { Config } from '../../lib/config';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { describeUndecoded } from '../../lib/temporal/workflowDescription';
import { markerSealFor } from '../../lib/vm/markerSeal';
import { inspectVmForRebuild } from '../../lib/vm/rebuildTarget';
import { clientOver, describing, NAMESPACE, OUR_KEY, ours, type Run, sealed, Status as S, TASK_QUEUE, theirs } from '../fixtures/temporal/fakeService';

/**
 * Whether a workflow runs, and as what, is read without decoding its memo: one sealed with a
 * key this deployment lacks (another deployment on the namespace, a key dropped too early
 * after rotation, a start by hand) runs all the same, and what only asked whether it runs
 * must not fail on it. The client is the SDK's, over a stand-in of the server: no Temporal.
 */

let dataDir: string;
let config: Config;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-describe-'));
  config = {
    dataDir,
    encryption: { keys: `ours:${OUR_KEY.toString('base64')}` },
    temporal: { namespace: NAMESPACE, taskQueue: TASK_QUEUE },
    mainNode: 'pve1',
  } as unknown as Config;
});
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** A VM an install of ours built: markers naming `owner`/`run`, sealed with our key. */
function installedVm(vmid: number, owner: string, run: string, createdSec: number) {
  const fields = { vmid, owner, run, spec: Buffer.from('{}').toString('base64url') };
  const description = installedDescription(fields, markerSealFor(config).seal(fields));
  return { vmid, node: 'pve1', description, name: `vm${vmid}`, entries: { meta: `ctime=${createdSec}` }, disks: [] };
}

/** A cluster of one node holding `vms`. */
function clusterOf(vms: Array<ReturnType<typeof installedVm>>): ProxmoxCluster {
  const node = {
    config: async (vmid: number) => vms.find((v) => v.vmid === vmid),
    status: async () => 'running',
  };
  return {
    vms: async () => vms.map(({ vmid, node }) => ({ vmid, node, type: 'qemu' })),
    requireNode: () => node,
    node: () => node,
    locateGuest: async (vmid: number) => (vms.some((v) => v.vmid === vmid) ? { node: 'pve1', type: 'qemu' } : undefined),
  } as unknown as ProxmoxCluster;
}

describe('describeUndecoded', () => {
  test('says what the SDK\'s describe says of a workflow it can decode, for every status', async () => {
    const statuses = Object.values(S).filter((v): v is number => typeof v === 'number');
    const runs: Run[] = [];
    for (const status of statuses) {
      const workflowId = `wf-${status}`;
      runs.push({ workflowId, runId: `run-${status}`, type: 'vmStart', status, memo: { startedBy: await sealed(ours, workflowId, 'me') }, closeSec: 1_700_000_060 });
    }
    const client = clientOver(describing(runs));
    for (const { workflowId } of runs) {
      const sdk = await client.workflow.getHandle(workflowId).describe();
      expect(await describeUndecoded(client, workflowId)).toEqual({
        workflowId,
        runId: sdk.runId,
        type: sdk.type,
        taskQueue: sdk.taskQueue,
        status: sdk.status.name,
        startTime: sdk.startTime,
        closeTime: sdk.closeTime,
      });
    }
  });

  test('a workflow the namespace does not know is undefined; the run asked for is the one described', async () => {
    const client = clientOver(
      describing([
        { workflowId: 'wf', runId: 'run-1', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_FAILED },
        { workflowId: 'wf', runId: 'run-2', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_RUNNING },
      ]),
    );
    expect(await describeUndecoded(client, 'none')).toBeUndefined();
    expect((await describeUndecoded(client, 'wf'))?.status).toBe('RUNNING');
    expect((await describeUndecoded(client, 'wf', 'run-1'))?.status).toBe('FAILED');
    expect(await describeUndecoded(client, 'wf', 'run-3')).toBeUndefined();
  });

  test('a memo sealed with a key this deployment lacks is no error', async () => {
    const memo = { request: await sealed(theirs, 'install-x', { name: 'db' }) };
    const client = clientOver(describing([{ workflowId: 'install-x', runId: 'run-x', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_RUNNING, memo }]));
    await expect(client.workflow.getHandle('install-x').describe()).rejects.toThrow(/unknown key id "theirs"/);
    expect(await describeUndecoded(client, 'install-x')).toMatchObject({ workflowId: 'install-x', runId: 'run-x', type: 'installVm', status: 'RUNNING' });
  });
});

describe('the reconciler', () => {
  const nowSec = Math.floor(Date.now() / 1000);
  const retention = {
    describeNamespace: async () => ({ config: { workflowExecutionRetentionTtl: { seconds: 7 * 86400 } } }),
  };

  async function plan(vms: Array<ReturnType<typeof installedVm>>, runs: Run[]) {
    const client = clientOver({ ...describing(runs), ...retention });
    return new MockActivityEnvironment().run(() => reconcileActivities({ config, proxmox: clusterOf(vms), client }).planReconcile());
  }

  test('reads the state of an owner run whose memo it cannot decode, and keeps the VM it completed', async () => {
    // Taken for an owner the namespace does not know, this young VM would be removed.
    const memo = { request: await sealed(theirs, 'install-a', { name: 'web' }) };
    const items = await plan(
      [installedVm(120, 'install-a', 'run-a', nowSec - 600)],
      [{ workflowId: 'install-a', runId: 'run-a', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_COMPLETED, memo, closeSec: nowSec - 300 }],
    );
    expect(items).toEqual([expect.objectContaining({ vmid: 120, owner: 'install-a', ownerState: 'COMPLETED', action: 'keep', reason: 'its owner install-a completed' })]);
  });

  test('an operation on the VM whose memo it cannot decode still makes the VM busy', async () => {
    const items = await plan(
      [installedVm(121, 'install-b', 'run-b', nowSec - 600)],
      [
        { workflowId: 'install-b', runId: 'run-b', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_FAILED, closeSec: nowSec - 300 },
        { workflowId: 'vm-121', runId: 'run-op', type: 'vmDestroy', status: S.WORKFLOW_EXECUTION_STATUS_RUNNING, memo: { startedBy: await sealed(theirs, 'vm-121', 'someone') } },
      ],
    );
    expect(items).toEqual([expect.objectContaining({ vmid: 121, ownerState: 'FAILED', action: 'keep', reason: 'busy: vmDestroy (workflow vm-121) is running on it' })]);
  });

  test('decodable and unknown owners are judged as before', async () => {
    const items = await plan(
      [installedVm(122, 'install-c', 'run-c', nowSec - 600), installedVm(123, 'install-d', 'run-d', nowSec - 600)],
      [{ workflowId: 'install-c', runId: 'run-c', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_TERMINATED, memo: { request: await sealed(ours, 'install-c', {}) }, closeSec: nowSec - 300 }],
    );
    expect(items).toEqual([
      expect.objectContaining({ vmid: 122, ownerState: 'TERMINATED', action: 'remove', reason: 'its owner install-c closed as terminated' }),
      expect.objectContaining({ vmid: 123, ownerState: 'UNKNOWN_TO_NAMESPACE', action: 'remove' }),
    ]);
  });
});

describe('runningVmOperation', () => {
  test('names the operation holding vm-<id> although its memo cannot be decoded here', async () => {
    const memo = { startedBy: await sealed(theirs, 'vm-130', 'someone') };
    const client = clientOver(describing([{ workflowId: 'vm-130', runId: 'run-1', type: 'vmMigrate', status: S.WORKFLOW_EXECUTION_STATUS_RUNNING, memo, startSec: 1_700_000_000 }]));
    expect(await temporalActivities({ client }).runningVmOperation({ vmid: 130 })).toEqual({
      workflowId: 'vm-130',
      runId: 'run-1',
      type: 'vmMigrate',
      startTime: '2023-11-14T22:13:20.000Z',
    });
  });

  test('nothing when vm-<id> has closed or never ran', async () => {
    const client = clientOver(describing([{ workflowId: 'vm-131', runId: 'run-1', type: 'vmStop', status: S.WORKFLOW_EXECUTION_STATUS_COMPLETED, closeSec: 1_700_000_100 }]));
    expect(await temporalActivities({ client }).runningVmOperation({ vmid: 131 })).toBeUndefined();
    expect(await temporalActivities({ client }).runningVmOperation({ vmid: 132 })).toBeUndefined();
  });
});

describe('a rebuild', () => {
  test('is refused while the install that owns the VM runs, although its memo cannot be decoded here', async () => {
    const memo = { request: await sealed(theirs, 'install-e', { name: 'web' }) };
    const client = clientOver(describing([{ workflowId: 'install-e', runId: 'run-e', type: 'installVm', status: S.WORKFLOW_EXECUTION_STATUS_RUNNING, memo }]));
    const proxmox = clusterOf([installedVm(140, 'install-e', 'run-e', 1_700_000_000)]);
    await expect(inspectVmForRebuild({ config, proxmox, client }, { vmid: 140 })).rejects.toMatchObject({
      type: 'VmBusyError',
      message: 'VM 140 (vm140) is still being built by installVm (workflow install-e); try again when it has finished',
    });
  });
});
