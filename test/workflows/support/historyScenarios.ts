import { Context } from '@temporalio/activity';
import type { Workflow } from '@temporalio/common';
import { installVm } from '../../../workflows/install';
import * as lifecycle from '../../../workflows/lifecycle';
import { vmRebuild } from '../../../workflows/rebuild';
import { scheduledRebuild } from '../../../workflows/scheduledRebuild';
import { reconcileVms } from '../../../workflows/reconcile';
import { StorageError } from '../../../lib/proxmox/errors';
import { addressPool } from '../../../workflows/addressPool';
import { storageSlots } from '../../../workflows/storageSlots';
import { buildTemplate } from '../../../workflows/template';
import { acquireSlotUpdate, allocateAddressUpdate, releaseAddressUpdate, releaseSlotUpdate } from '../../../contract';
import { outputSignal, relayedProgressSignal, vmWorkflowId, type Activities, type InstallInput, type InstallSpec } from '../../../contract';
import { FakeCluster, untilCancelled } from './fakeCluster';
import type { WorkflowTestEnv } from './testEnv';

/**
 * The runs whose histories are kept under test/fixtures/histories/ and replayed by
 * replay.workflow.test.ts: each workflow type, on its ordinary path and on the paths that
 * take other branches (compensation, cancellation, a skipped scheduled run). They run on
 * the time-skipping server with fake activities; a history holds only what the workflow
 * decided and what its activities answered, so fakes record the same commands a real
 * cluster would. Each returns the id of the workflow whose history is kept; it has closed.
 */
export interface HistoryScenario {
  name: string;
  run(t: WorkflowTestEnv): Promise<string>;
}

// Most histories in test/fixtures/histories were recorded before the spec called its cores
// `cores` (they say `cpu`): their replay shows that installs and rebuilds in flight across
// that rename still run. `installVm-spec-says-cpu` keeps an install of that shape when the
// others are recorded again.
const spec: InstallSpec = { os: 'debian', version: '12', cores: 2, ramMb: 2048, diskGb: 20, user: 'admin' };
const installInput = (over: Partial<InstallSpec> = {}): InstallInput => ({ spec: { ...spec, ...over }, secrets: {}, mainNode: 'pve1' });
const recorded: InstallSpec = { ...spec, vmid: 120, name: 'web' };

/** Starts `workflow` under `workflowId` with `acts` and waits until it has closed, however it ended. */
async function runToEnd(t: WorkflowTestEnv, acts: Activities, workflow: Workflow, workflowId: string, args: unknown[], during?: (h: { cancel(): Promise<unknown> }) => Promise<void>): Promise<string> {
  return t.withActivities(acts, async () => {
    const handle = await t.env.client.workflow.start(workflow, { workflowId, taskQueue: t.taskQueue, args });
    await during?.(handle);
    await handle.result().catch(() => undefined);
    return workflowId;
  });
}

/** importDisk as the real one streams qm's output: signals to its own workflow. */
function streamingImport(t: WorkflowTestEnv, cluster: FakeCluster): Partial<Activities> {
  const plain = cluster.plain();
  return {
    async importDisk(input) {
      const wf = Context.current().info.workflowExecution!;
      await t.env.client.workflow.getHandle(wf.workflowId, wf.runId).signal(outputSignal, {
        lines: [{ status: 'processing', message: 'transferred 2.0 GiB of 2.0 GiB (100.00%)' }],
      });
      return plain.importDisk(input);
    },
  };
}

/** downloadImage as the real one streams its progress: a signal to its own workflow. */
function streamingDownload(t: WorkflowTestEnv, cluster: FakeCluster): Partial<Activities> {
  const plain = cluster.plain();
  return {
    async downloadImage(input) {
      const wf = Context.current().info.workflowExecution!;
      await t.env.client.workflow.getHandle(wf.workflowId, wf.runId).signal(outputSignal, { lines: [{ status: 'processing', message: '[*] downloading: 100%' }] });
      return plain.downloadImage(input);
    },
  };
}

/** relayProgress as the real one does: the child's events, signalled to the parent. */
function relaying(t: WorkflowTestEnv): Partial<Activities> {
  return {
    async relayProgress() {
      const wf = Context.current().info.workflowExecution!;
      await t.env.client.workflow.getHandle(wf.workflowId, wf.runId).signal(relayedProgressSignal, {
        events: [{ step: 'VM creation > qm create', status: 'processing', message: '[*] creating VM', at: 0 }],
      });
      return 1;
    },
  };
}

function installedWeb(): FakeCluster {
  const cluster = new FakeCluster();
  cluster.add({ vmid: 120, name: 'web-120', owner: 'install-old', status: 'running', spec: recorded });
  return cluster;
}

const guest = { vmid: 130, ip: '10.10.0.130', user: 'debian' };
const lifecycleCases: Array<[Workflow, Record<string, unknown>, 'running' | 'stopped']> = [
  [lifecycle.vmStart, guest, 'stopped'],
  [lifecycle.vmReboot, guest, 'running'],
  [lifecycle.vmShutdown, { vmid: 130 }, 'running'],
  [lifecycle.vmStop, { vmid: 130 }, 'running'],
  [lifecycle.vmDestroy, { vmid: 130 }, 'stopped'],
  [lifecycle.vmSetCpu, { vmid: 130, cores: 4 }, 'stopped'],
  [lifecycle.vmSetMemory, { vmid: 130, memoryMb: 4096 }, 'stopped'],
  [lifecycle.vmSetDisk, { vmid: 130, disk: 'scsi0', incrementGb: 8 }, 'stopped'],
  [lifecycle.vmMigrate, { vmid: 130, from: 'pve1', target: 'pve2' }, 'stopped'],
  [lifecycle.vmAdopt, { vmid: 130, by: '127.0.0.1' }, 'running'],
];

export const historyScenarios: HistoryScenario[] = [
  {
    name: 'installVm-completed',
    run: (t) => {
      const cluster = new FakeCluster();
      return runToEnd(t, cluster.activities(streamingImport(t, cluster)), installVm, 'install-fixture-completed', [installInput({ name: 'web', node: 'pve2' })]);
    },
  },
  {
    // An input as versions before the rename wrote it: its spec calls the cores `cpu`.
    name: 'installVm-spec-says-cpu',
    run: (t) => {
      const cluster = new FakeCluster();
      const { cores, ...rest } = spec;
      const input = { spec: { ...rest, cpu: cores }, secrets: {}, mainNode: 'pve1' } as unknown as InstallInput;
      return runToEnd(t, cluster.activities(), installVm, 'install-fixture-spec-says-cpu', [input]);
    },
  },
  {
    name: 'installVm-failed-after-qm-create',
    run: (t) => {
      const cluster = new FakeCluster();
      const acts = cluster.activities({
        async importDisk() {
          throw new StorageError({ command: 'qm disk import', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' is not available on node 'pve1'" });
        },
      });
      return runToEnd(t, acts, installVm, 'install-fixture-failed', [installInput()]);
    },
  },
  {
    name: 'installVm-cancelled',
    run: (t) => {
      const cluster = new FakeCluster();
      return runToEnd(t, cluster.activities({ waitForSsh: untilCancelled }), installVm, 'install-fixture-cancelled', [installInput()], async (h) => {
        await cluster.called('waitForSsh');
        await h.cancel();
      });
    },
  },
  ...lifecycleCases.map(([workflow, input, status]): HistoryScenario => ({
    name: `${workflow.name}-completed`,
    run: async (t) => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status });
      // Issued as the API issues it: a bare input is refused before its first step.
      return runToEnd(t, cluster.activities(), workflow, vmWorkflowId(130), [await t.issue(input as { vmid: number })]);
    },
  })),
  {
    name: 'vmRebuild-completed',
    run: async (t) => {
      const cluster = installedWeb();
      return runToEnd(t, cluster.activities(relaying(t)), vmRebuild, vmWorkflowId(120), [await t.issue({ vmid: 120 })]);
    },
  },
  {
    name: 'scheduledRebuild-rebuilt',
    run: (t) => {
      const cluster = installedWeb();
      return runToEnd(t, cluster.activities(relaying(t)), scheduledRebuild, 'rebuild-vm-120-2026-12-01T03:00:00Z', [{ vmid: 120 }]);
    },
  },
  {
    name: 'scheduledRebuild-skipped',
    run: async (t) => {
      const cluster = installedWeb();
      const acts = cluster.activities({
        waitForSsh: untilCancelled,
        async runningVmOperation({ vmid }) {
          const d = await t.env.client.workflow.getHandle(vmWorkflowId(vmid)).describe();
          return { workflowId: d.workflowId, runId: d.runId, type: d.type, startTime: d.startTime.toISOString() };
        },
      });
      return t.withActivities(acts, async () => {
        const holder = await t.env.client.workflow.start(lifecycle.vmStart, { workflowId: vmWorkflowId(120), taskQueue: t.taskQueue, args: [await t.issue({ vmid: 120, ip: '10.10.0.120', user: 'debian' })] });
        await cluster.called('waitForSsh');
        try {
          return await runToEnd(t, acts, scheduledRebuild, 'rebuild-vm-120-2026-12-01T04:00:00Z', [{ vmid: 120 }]);
        } finally {
          await holder.cancel();
          await holder.result().catch(() => undefined);
        }
      });
    },
  },
  ...[false, true].map((dryRun): HistoryScenario => ({
    name: `reconcileVms-${dryRun ? 'dry-run' : 'removed'}`,
    run: (t) => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 120, owner: 'install-done' });
      cluster.owners.set('install-done', 'COMPLETED');
      cluster.add({ vmid: 121, owner: 'install-terminated', status: 'stopped' });
      cluster.owners.set('install-terminated', 'TERMINATED');
      cluster.add({ vmid: 150, owner: 'by-hand', marked: false });
      return runToEnd(t, cluster.activities(), reconcileVms, `reconcile-fixture-${dryRun ? 'dry-run' : 'run'}`, [{ dryRun }]);
    },
  })),
  {
    // Address pools (issue 24): an install leasing its address, whose failure releases it.
    name: 'installVm-address-pool-failed',
    run: (t) => {
      const cluster = new FakeCluster();
      const acts = cluster.activities({
        async importDisk() {
          throw new StorageError({ command: 'qm disk import', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' is not available on node 'pve1'" });
        },
      });
      return runToEnd(t, acts, installVm, 'install-fixture-address-pool', [installInput({ addressPool: 'lab', vmid: 300 })]);
    },
  },
  {
    name: 'buildTemplate-completed',
    run: (t) => runToEnd(t, new FakeCluster().activities(), buildTemplate, 'template-debian-12', [{ os: 'debian', version: '12' }]),
  },
  {
    // Issue 25's fast path: a clone of the current template, the per-VM init script, no reboot.
    name: 'installVm-from-template',
    run: (t) => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 110, owner: 'template-debian-12', status: 'stopped', name: 'tpl-debian-12-110', template: { os: 'debian', version: '12', storage: 'local-lvm', recipe: 'recipe-1', builtAt: '2026-12-01T03:30:00.000Z' } });
      return runToEnd(t, cluster.activities(), installVm, 'install-fixture-template', [installInput({ name: 'web' })]);
    },
  },
  {
    // The preparation side by side (patch preparation-side-by-side), the download streaming
    // its output meanwhile; the static address check beside the cloud-init wait.
    name: 'installVm-side-by-side',
    run: (t) => {
      const cluster = new FakeCluster();
      return runToEnd(t, cluster.activities({ ...streamingImport(t, cluster), ...streamingDownload(t, cluster) }), installVm, 'install-fixture-side-by-side', [installInput({ name: 'web', node: 'pve2' })]);
    },
  },
  {
    // A preparation step failing for good while the download beside it runs: the download is cancelled.
    name: 'installVm-side-by-side-failed',
    run: (t) => {
      const cluster = new FakeCluster();
      const acts = cluster.activities({
        downloadImage: untilCancelled,
        async checkStorage() {
          await cluster.called('downloadImage');
          throw new StorageError({ command: 'pvesm status', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' does not exist" });
        },
      });
      return runToEnd(t, acts, installVm, 'install-fixture-side-by-side-failed', [installInput()]);
    },
  },
  {
    name: 'vmDestroy-release-address',
    run: async (t) => {
      const cluster = new FakeCluster();
      cluster.add({ vmid: 130, owner: 'install-1', status: 'stopped' });
      const acts = cluster.activities({
        async releaseAddress() {
          return ['127.1.0.7'];
        },
      });
      return runToEnd(t, acts, lifecycle.vmDestroy, vmWorkflowId(130), [await t.issue({ vmid: 130 })]);
    },
  },
  {
    // The pool entity never ends: its history so far is what a worker replays.
    name: 'addressPool-leases',
    run: (t) =>
      t.withActivities(new FakeCluster().activities(), async () => {
        const workflowId = 'address-pool-fixture';
        const handle = await t.env.client.workflow.start(addressPool, { workflowId, taskQueue: t.taskQueue, args: [{ pool: 'fixture', leases: [] }] });
        const pool = { name: 'fixture', cidr: '127.1.0.0/24', gateway: '127.1.0.1', reserved: ['127.1.0.2-127.1.0.9'] };
        const leases = await Promise.all([1, 2, 3].map((i) => handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner: `install-${i}`, vmid: 300 + i }] })));
        await handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner: 'install-1', vmid: 301 }] });
        // Histories recorded before lease generations released by VMID ({ vmid: 302 }); they replay as they ran.
        const second = leases.find((l) => l.vmid === 302)!;
        await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: second.address, generation: second.generation }] });
        await handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner: 'install-4', address: '127.1.0.200' }] }).catch(() => undefined);
        return workflowId;
      }),
  },
  {
    // A storage's clone slots, an entity too: two held, one waiting, a release, a renewal,
    // a slot given to the waiter, and a slot freed by its ttl.
    name: 'storageSlots-slots',
    run: (t) =>
      t.withActivities(new FakeCluster().activities(), async () => {
        const workflowId = 'storage-slots-pve1-fixture';
        const handle = await t.env.client.workflow.start(storageSlots, { workflowId, taskQueue: t.taskQueue, args: [{ node: 'pve1', storage: 'fixture', holders: [], waiting: [] }] });
        const acquire = (holder: string, ttlMs = 60_000) => handle.executeUpdate(acquireSlotUpdate, { args: [{ holder, limit: 2, ttlMs }] });
        await Promise.all([acquire('install-1/9'), acquire('install-2/9', 5_000)]);
        const third = acquire('install-3/9');
        await acquire('install-1/9');
        await handle.executeUpdate(releaseSlotUpdate, { args: [{ holder: 'install-1/9' }] });
        await third;
        await t.env.sleep(6_000);
        await acquire('install-4/9');
        return workflowId;
      }),
  },
];
