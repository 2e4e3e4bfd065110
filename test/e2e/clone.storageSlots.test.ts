import { testNamespace } from '../support/namespaces';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { execa } from 'execa';
import { withStorageSlot } from '../../activities/storageSlots';
import { storageSlotsQuery, storageSlotsWorkflowId } from '../../contract';
import type { Config } from '../../lib/config';
import { LocalExecutor } from '../../lib/executor';
import { CliNode } from '../../lib/proxmox';
import { StorageLockError } from '../../lib/proxmox/errors';
import { workflowTypeBinding } from '../../lib/temporal/typeBinding';
import { clusterPaths } from '../../sandbox/state/paths';
import { startTestCluster, type TestCluster } from '../../sandbox/testkit';
import { testSpawner } from '../support/spawner';

/**
 * Many clones of one template at once, on a sandbox storage whose lock is slow (each
 * clone holds it 400 ms, a caller waits 1 s): started together they fail on the lock, as
 * on Proxmox; each in a storage slot (workflows/storageSlots.ts, 2 per storage) they all
 * succeed.
 */
let t: TestCluster;
let worker: Worker;
let running: Promise<void>;
let client: Client;
const taskQueue = `clone-slots-${process.pid}`;

beforeAll(async () => {
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } } });
  } catch {
    // Installed already in this test file's process.
  }
  t = await startTestCluster();
  const address = process.env.TEST_TEMPORAL_ADDRESS!;
  worker = await Worker.create({
    connection: await NativeConnection.connect({ address }),
    namespace: testNamespace(),
    taskQueue,
    workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! },
    activities: {},
  });
  running = worker.run();
  client = new Client({ connection: await Connection.connect({ address }), namespace: testNamespace(), interceptors: workflowTypeBinding() });
});
afterAll(async () => {
  worker?.shutdown();
  await running;
  await client?.connection.close();
  await t?.dispose();
});

const qm = (...args: string[]) => execa('qm', args, { env: t.cluster.envFor('pve1'), reject: false });
const node = () => new CliNode(new LocalExecutor('pve1', { spawner: testSpawner(), env: t.cluster.envFor('pve1') }));

test('parallel clones fail on the storage lock; in storage slots, all of them clone', async () => {
  const image = path.join(t.tmp, 'golden.qcow2');
  await execa('qemu-img', ['create', '-f', 'qcow2', image, '1G']);
  expect((await qm('create', '900', '--name', 'golden', '--memory', '512', '--scsihw', 'virtio-scsi-pci')).exitCode).toBe(0);
  expect((await qm('importdisk', '900', image, 'local-lvm')).exitCode).toBe(0);
  expect((await qm('set', '900', '--scsi0', 'local-lvm:vm-900-disk-0')).exitCode).toBe(0);
  await node().convertToTemplate(900);

  const file = clusterPaths(t.cluster.dir).clusterJson;
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync(file, 'utf8')), storageLockTimeoutMs: 1000, storageOpMs: 400 }));

  const ids = [901, 902, 903, 904, 905, 906, 907, 908];
  const bare = await Promise.allSettled(ids.map((id) => node().cloneVm(900, id)));
  const failed = bare.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown);
  expect(failed.length).toBeGreaterThan(0);
  for (const err of failed) expect(err).toBeInstanceOf(StorageLockError);
  for (const id of ids) if (await t.cluster.readConfig(id)) expect((await qm('destroy', String(id))).exitCode).toBe(0);

  const config = { cloneConcurrency: 2, temporal: { taskQueue } } as unknown as Config;
  await Promise.all(
    ids.map((id) =>
      new MockActivityEnvironment().run(() => withStorageSlot({ config, client }, { node: 'pve1', storage: 'local-lvm', holder: `install-${id}/5` }, () => node().cloneVm(900, id))),
    ),
  );
  for (const id of ids) expect(await t.cluster.readConfig(id)).toContain(`\nscsi0: local-lvm:vm-${id}-disk-0,size=1G\n`);
  const slots = await client.workflow.getHandle(storageSlotsWorkflowId(taskQueue, 'pve1', 'local-lvm')).query(storageSlotsQuery);
  expect(slots).toMatchObject({ holders: [], waiting: [] });
});
