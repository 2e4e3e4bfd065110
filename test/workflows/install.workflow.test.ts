import { ActivityFailure, ApplicationFailure, CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import { installVm } from '../../workflows/install';
import { type Activities, type InstallInput, type InstallSpec, progressQuery, VM_NODE } from '../../contract';
import { StorageError } from '../../lib/proxmox/errors';
import { FakeCluster, untilCancelled } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

const spec: InstallSpec = { os: 'debian', version: '12', cores: 2, ramMb: 2048, diskGb: 20, user: 'admin' };
// As the API starts it: no main node, the worker's MAIN_NODE (the fake cluster's) decides.
const input = (over: Partial<InstallSpec> = {}): InstallInput => ({
  spec: { ...spec, ...over },
  secrets: { passwd: 'cloud-pass' },
});

let t: WorkflowTestEnv;
let n = 0;
const id = () => `install-test-${++n}`;

/** The preparation steps, which run side by side: no one of them needs another's answer. */
const PREPARATION: Array<keyof Activities> = ['checkStorage', 'clusterCpuType', 'findTemplate', 'downloadImage', 'stageImage', 'servicePublicKey'];

/**
 * An activity that goes on only once every one of `others` has been called too: steps
 * run in turn never get past it (it fails for good after 10 s of real time instead).
 */
function meeting<T>(cluster: FakeCluster, others: Array<keyof Activities>, then: () => Promise<T>): () => Promise<T> {
  return async () => {
    const until = Date.now() + 10_000;
    while (!others.every((a) => cluster.sequence().includes(a))) {
      if (Date.now() > until) throw ApplicationFailure.nonRetryable(`still waiting for ${others.filter((a) => !cluster.sequence().includes(a)).join(', ')}: the steps ran in turn`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return then();
  };
}

/** `untilCancelled`, noting in `cancelled` that the workflow did cancel it. */
function hangs(name: string, cancelled: string[]): () => Promise<never> {
  return async () => {
    try {
      return await untilCancelled();
    } catch (err) {
      cancelled.push(name);
      throw err;
    }
  };
}

/** Waits (real time, bounded by the test's timeout) until `check` holds. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 20));
}

/** The ApplicationFailure an activity (or the workflow itself) failed the run with. */
function rootCause(err: unknown): ApplicationFailure | undefined {
  let cur = err;
  while (cur instanceof WorkflowFailedError || cur instanceof ActivityFailure) cur = cur.cause;
  return cur instanceof ApplicationFailure ? cur : undefined;
}

describeWorkflows('installVm (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test('runs the pipeline in order and names the VM <name>-<vmid>', async () => {
    const cluster = new FakeCluster();
    const workflowId = id();
    const { result, page } = await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId, taskQueue: t.taskQueue, args: [input({ name: 'web' })] });
      return { result: await handle.result(), page: await handle.query(progressQuery, 0) };
    });

    expect(result).toMatchObject({ vmid: 120, name: 'web-120', node: 'pve1', user: 'admin', ip: '10.10.0.120' });
    // The preparation runs side by side (in whichever order the worker starts them), the
    // image after the template lookup. The SSH wait brings the agent's address, and the
    // init script waits for cloud-init itself: no activity of their own.
    const sequence = cluster.sequence();
    expect([...sequence.slice(0, PREPARATION.length)].sort()).toEqual([...PREPARATION].sort());
    expect(sequence.indexOf('findTemplate')).toBeLessThan(sequence.indexOf('downloadImage'));
    expect(sequence.indexOf('downloadImage')).toBeLessThan(sequence.indexOf('stageImage'));
    expect(sequence.slice(PREPARATION.length)).toEqual(['allocateVmid', 'createVm', 'importDisk', 'configureVm', 'startVm', 'waitForSsh', 'runInitScript', 'rebootVm', 'waitForSsh']);
    expect(cluster.inputs('createVm')[0]).toMatchObject({ vmid: 120, name: 'web-120', owner: workflowId, cpuType: 'x86-64-v2-AES' });
    // A static install asks the agent once, with the first SSH wait, only to compare.
    expect(cluster.inputs('waitForSsh').map((i) => i.askAddress)).toEqual([true, undefined]);
    expect(cluster.inputs('runInitScript')).toEqual([expect.objectContaining({ afterCloudInit: true })]);
    expect(page.events.map((e) => `${e.step}: ${e.message}`)).toContain('VM initialization > wait for SSH: [*] the guest agent reports 10.10.0.120, as configured');
    expect(cluster.vms.get(120)).toMatchObject({ owner: workflowId, status: 'running' });
    expect(page.state).toBe('completed');
    expect(page.events.slice(-3).map((e) => e.message)).toEqual(['[*] VMID: 120', '[*] IP: 10.10.0.120', '[*] User: admin']);
  });

  test('the preparation steps run side by side, each step with its start and its end', async () => {
    const cluster = new FakeCluster();
    const plain = cluster.plain();
    const besides = ['checkStorage', 'clusterCpuType', 'downloadImage', 'servicePublicKey'] as const;
    // Each waits for the other three: in turn, none would get past the first.
    const acts = cluster.activities({
      checkStorage: meeting(cluster, [...besides], () => plain.checkStorage({ diskGb: 20 })),
      clusterCpuType: meeting(cluster, [...besides], () => plain.clusterCpuType({ os: 'debian', version: '12' })),
      downloadImage: meeting(cluster, [...besides], () => plain.downloadImage({ os: 'debian', version: '12' })),
      servicePublicKey: meeting(cluster, [...besides], () => plain.servicePublicKey()),
    });
    const events = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input({ name: 'web' })] });
      await handle.result();
      return (await handle.query(progressQuery, 0)).events;
    });

    const lines = events.map((e) => `${e.step}: ${e.message}`);
    const startAndEnd = (step: string, doing: string) => [`${step}: [*] ${doing}`, expect.stringMatching(new RegExp(`^${step}: \\[\\+\\] ${doing} done \\(\\d+\\.\\d\\ds\\)$`))];
    for (const [step, doing] of [
      ['preparation > storage', 'checking storage pool'],
      ['preparation > CPU baseline', 'detecting cluster CPU baseline'],
      ['OS preparation > download', 'fetching debian 12 cloud image'],
      ['OS preparation > stage image', 'placing the image on the main node'],
      ['SSH preparation > main node key', 'reading the main node SSH key'],
    ]) {
      const [start, end] = startAndEnd(step, doing);
      expect(lines.filter((l) => l.startsWith(`${step}: `))).toEqual(expect.arrayContaining([start, end]));
      expect(lines.indexOf(start)).toBeLessThan(lines.findIndex((l) => end.asymmetricMatch(l)));
    }
    // Side by side: every preparation step started before the first one ended.
    const firstEnd = lines.findIndex((l) => l.includes('[+] '));
    for (const step of ['preparation > storage', 'preparation > CPU baseline', 'SSH preparation > main node key']) {
      expect(lines.findIndex((l) => l.startsWith(`${step}: [*] `))).toBeLessThan(firstEnd);
    }
    expect(lines).toContain('VM initialization > wait for SSH: [*] the guest agent reports 10.10.0.120, as configured');
    expect(events.slice(-4).map((e) => e.message)).toEqual([expect.stringMatching(/^\[\+\] VM installation completed in/), '[*] VMID: 120', '[*] IP: 10.10.0.120', '[*] User: admin']);
  });

  test('a preparation step that fails cancels the steps beside it, is the step the error names, and ends the install once', async () => {
    const cluster = new FakeCluster();
    const cancelled: string[] = [];
    const acts = cluster.activities({
      downloadImage: hangs('downloadImage', cancelled),
      servicePublicKey: hangs('servicePublicKey', cancelled),
      // Fails once the others are under way, so there is something to cancel.
      checkStorage: meeting(cluster, ['downloadImage', 'servicePublicKey'], async () => {
        throw new StorageError({ command: 'pvesm status', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' does not exist" });
      }),
    });
    const { err, page } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] });
      const err = await handle.result().catch((e: unknown) => e);
      await until(() => cancelled.length === 2);
      return { err, page: await handle.query(progressQuery, 0) };
    });

    expect(rootCause(err)?.type).toBe('StorageError');
    expect(cancelled.sort()).toEqual(['downloadImage', 'servicePublicKey']);
    // No VM was made: nothing to remove.
    expect(cluster.sequence()).not.toContain('createVm');
    expect(cluster.sequence()).not.toContain('destroyOwnedVm');
    expect(page.state).toBe('failed');
    const errors = page.events.filter((e) => e.status === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ step: 'preparation > storage' });
    expect(errors[0].message).toContain("storage 'local-lvm' does not exist");
    expect(page.events.at(-1)).toBe(errors.at(-1));
  });

  test('cloud-init failing in the init script step removes the VM once, under that step', async () => {
    const cluster = new FakeCluster();
    const acts = cluster.activities({
      runInitScript: async () => {
        throw ApplicationFailure.nonRetryable('cloud-init crashed', 'GuestError');
      },
    });
    const workflowId = id();
    const { err, page, run } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId, taskQueue: t.taskQueue, args: [input()] });
      const err = await handle.result().catch((e: unknown) => e);
      return { err, page: await handle.query(progressQuery, 0), run: handle.firstExecutionRunId };
    });

    expect(rootCause(err)?.message).toBe('cloud-init crashed');
    expect(cluster.inputs('destroyOwnedVm')).toEqual([{ vmid: 120, owner: workflowId, run }]);
    expect(cluster.vms.size).toBe(0);
    expect(cluster.sequence()).not.toContain('rebootVm');
    const errors = page.events.filter((e) => e.status === 'error');
    expect(errors).toEqual([expect.objectContaining({ step: 'VM initialization > init script', message: '[-] cloud-init crashed' })]);
    expect(page.events.filter((e) => e.message === '[*] removing VM 120')).toEqual([expect.objectContaining({ step: 'VM initialization > init script' })]);
  });

  test('a static install whose guest agent is silent says so and completes: the address check never fails an install', async () => {
    const cluster = new FakeCluster();
    const plain = cluster.plain();
    const acts = cluster.activities({
      waitForSsh: async (req) => {
        const pinned = await plain.waitForSsh(req);
        return pinned && { ...pinned, address: { reason: 'QEMU guest agent is not running' } };
      },
    });
    const { result, page } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] });
      return { result: await handle.result(), page: await handle.query(progressQuery, 0) };
    });
    expect(result).toMatchObject({ vmid: 120, ip: '10.10.0.120' });
    expect(page.events.map((e) => `${e.step}: ${e.message}`)).toContain('VM initialization > wait for SSH: [*] the guest agent reports no address (QEMU guest agent is not running)');
    expect(cluster.sequence()).not.toContain('readGuestAddress');
  });

  test('an install cancelled during the preparation cancels every step under way and has nothing to remove', async () => {
    const cluster = new FakeCluster();
    const cancelled: string[] = [];
    const acts = cluster.activities({ checkStorage: hangs('checkStorage', cancelled), downloadImage: hangs('downloadImage', cancelled) });
    const { err, page } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] });
      await cluster.called('checkStorage');
      await cluster.called('downloadImage');
      await handle.cancel();
      const err = await handle.result().catch((e: unknown) => e);
      await until(() => cancelled.length === 2);
      return { err, page: await handle.query(progressQuery, 0) };
    });

    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(cancelled.sort()).toEqual(['checkStorage', 'downloadImage']);
    expect(cluster.sequence()).not.toContain('createVm');
    expect(page.state).toBe('cancelled');
    expect(page.events.filter((e) => e.status === 'error')).toEqual([expect.objectContaining({ message: '[-] install cancelled' })]);
  });

  test('the image path reboots when the guest says it must or the spec says "always", not otherwise, and its events say which', async () => {
    const run = async (cluster: FakeCluster, over: Partial<InstallSpec>) =>
      t.withActivities(cluster.activities(), async () => {
        const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input(over)] });
        await handle.result();
        return (await handle.query(progressQuery, 0)).events;
      });
    const settled: Array<[boolean, string]> = [
      [true, 'VM initialization > reboot: [*] rebooting: kernel 6.1.0-99-amd64 is installed, 6.1.0-27-amd64 is running'],
      [false, 'VM initialization > reboot: [*] no reboot needed: no newer kernel than the running 6.1.0-27-amd64, no /run/reboot-required'],
    ];
    for (const [required, said] of settled) {
      const cluster = new FakeCluster();
      if (!required) cluster.rebootNeed = { required: false, why: 'no newer kernel than the running 6.1.0-27-amd64, no /run/reboot-required' };
      const events = await run(cluster, {});
      expect(cluster.sequence().slice(cluster.sequence().indexOf('runInitScript'))).toEqual(required ? ['runInitScript', 'rebootVm', 'waitForSsh'] : ['runInitScript']);
      expect(events.map((e) => `${e.step}: ${e.message}`)).toContain(said);
      // The seed's four final events, either way.
      expect(events.slice(-4).map((e) => e.message)).toEqual([expect.stringMatching(/^\[\+\] VM installation completed in/), '[*] VMID: 120', '[*] IP: 10.10.0.120', '[*] User: admin']);
    }

    const asked = new FakeCluster();
    asked.rebootNeed = { required: false, why: 'nothing new' };
    const events = await run(asked, { reboot: 'always' });
    expect(asked.sequence().slice(-2)).toEqual(['rebootVm', 'waitForSsh']);
    expect(events.map((e) => `${e.step}: ${e.message}`)).toContain('VM initialization > reboot: [*] rebooting, as asked (reboot "always")');
  });

  test('a DHCP install reads its address from the guest agent after start, and uses it for SSH and in its result', async () => {
    const cluster = new FakeCluster();
    const { result, page } = await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input({ ip: 'dhcp' })] });
      return { result: await handle.result(), page: await handle.query(progressQuery, 0) };
    });
    expect(result).toMatchObject({ vmid: 120, ip: '10.20.0.120' });
    // After the preparation (side by side): the address before SSH, which needs it.
    expect(cluster.sequence().slice(PREPARATION.length)).toEqual([
      'allocateVmid', 'createVm', 'importDisk', 'configureVm', 'startVm', 'readGuestAddress', 'waitForSsh', 'runInitScript', 'rebootVm', 'waitForSsh',
    ]);
    // The address came from the agent already: the SSH wait does not ask again.
    expect(cluster.inputs('waitForSsh').map((i) => i.askAddress)).toEqual([undefined, undefined]);
    expect(cluster.inputs('readGuestAddress')).toEqual([{ vmid: 120, wait: true, node: 'pve1' }]);
    expect(cluster.inputs('configureVm')[0]).toMatchObject({ ip: 'dhcp' });
    for (const activity of ['waitForSsh', 'runInitScript'] as const) {
      for (const call of cluster.inputs(activity)) expect(call).toMatchObject({ ip: '10.20.0.120' });
    }
    const messages = page.events.map((e) => `${e.step}: ${e.message}`);
    expect(messages).toContain('VM creation > qm create: [*] VMID 120, IP by DHCP, name 120-120');
    expect(messages).toContain('VM initialization > guest address: [*] address 10.20.0.120 (from the guest agent)');
    expect(page.events.slice(-3).map((e) => e.message)).toEqual(['[*] VMID: 120', '[*] IP: 10.20.0.120', '[*] User: admin']);
  });

  test('an install started before the spec called its cores `cores` (it said `cpu`) runs, and its activities get `cores`', async () => {
    const cluster = new FakeCluster();
    const { cores, ...rest } = spec;
    const legacy = { spec: { ...rest, cpu: cores }, secrets: {} } as unknown as InstallInput;
    const result = await t.withActivities(cluster.activities(), () =>
      t.env.client.workflow.execute(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [legacy] }),
    );
    expect(result).toMatchObject({ vmid: 120, user: 'admin' });
    for (const activity of ['createVm', 'configureVm'] as const) {
      const given = cluster.inputs(activity)[0].spec as unknown as Record<string, unknown>;
      expect({ activity, cores: given.cores, cpu: given.cpu }).toEqual({ activity, cores: 2, cpu: undefined });
    }
  });

  test('the worker\'s main node decides where the VM is, even when the input names another', async () => {
    // A worker with MAIN_NODE=pve2 runs an install whose input says pve1, as an API
    // configured differently used to send: the VM is created on pve2, so asking for pve2
    // needs no migration, and the result and the VmNode attribute say pve2.
    const cluster = new FakeCluster('pve2');
    const { result, node } = await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, {
        workflowId: id(),
        taskQueue: t.taskQueue,
        args: [{ ...input({ node: 'pve2' }), mainNode: 'pve1' }],
      });
      const result = await handle.result();
      return { result, node: (await handle.describe()).typedSearchAttributes.get(VM_NODE) };
    });
    expect(cluster.inputs('migrateVm')).toEqual([]);
    expect(result.node).toBe('pve2');
    expect(node).toBe('pve2');

    const unasked = await t.withActivities(cluster.activities(), () =>
      t.env.client.workflow.execute(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [{ ...input(), mainNode: 'pve1' }] }),
    );
    expect(unasked.node).toBe('pve2');
  });

  test("the guest's host key learnt by the first SSH wait is pinned for the init script and the wait after the reboot", async () => {
    const cluster = new FakeCluster();
    const hostKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyOfTheGuest';
    const acts = cluster.activities({ waitForSsh: async () => ({ hostKey, source: 'guest agent' as const, fingerprint: 'SHA256:guest' }) });
    const page = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] });
      await handle.result();
      return handle.query(progressQuery, 0);
    });
    expect(cluster.inputs('waitForSsh')).toEqual([
      { ip: '10.10.0.120', user: 'admin', vmid: 120, node: 'pve1', askAddress: true },
      { ip: '10.10.0.120', user: 'admin', vmid: 120, hostKey, node: 'pve1' },
    ]);
    expect(cluster.inputs('runInitScript')).toEqual([expect.objectContaining({ vmid: 120, hostKey })]);
    expect(page.events.map((e) => e.message)).toContain('[*] host key SHA256:guest (reported by the guest agent)');
  });

  test('migrates to the node asked for before the first boot', async () => {
    const cluster = new FakeCluster();
    const result = await t.withActivities(cluster.activities(), () =>
      t.env.client.workflow.execute(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input({ node: 'pve2' })] }),
    );
    expect(result.node).toBe('pve2');
    expect(cluster.inputs('migrateVm')).toEqual([{ vmid: 120, target: 'pve2', node: 'pve1' }]);
    // From the migration on, the activities look for the VM where it was moved to first.
    expect(new Set(['startVm', 'waitForSsh', 'readGuestAddress', 'rebootVm'].flatMap((a) => cluster.inputs(a as 'startVm').map((i) => i.node)))).toEqual(new Set(['pve2']));
    const seq = cluster.sequence();
    expect(seq.indexOf('migrateVm')).toBeLessThan(seq.indexOf('startVm'));
    expect(cluster.vms.get(120)?.node).toBe('pve2');
  });

  test('an auto-assigned VMID taken meanwhile: tries the next one and leaves the other VM alone', async () => {
    const cluster = new FakeCluster();
    const plain = cluster.plain();
    // Another install creates VM 120 between this run's cluster query and its qm create.
    const acts = cluster.activities({
      async allocateVmid(req) {
        const vmid = await plain.allocateVmid(req);
        if (vmid === 120) cluster.add({ vmid: 120, owner: 'install-by-someone-else' });
        return vmid;
      },
    });
    const result = await t.withActivities(acts, () =>
      t.env.client.workflow.execute(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] }),
    );

    expect(result).toMatchObject({ vmid: 121, name: '121-121' });
    expect(cluster.inputs('allocateVmid')).toEqual([{ exclude: [] }, { exclude: [120] }]);
    expect(cluster.inputs('createVm').map((c) => c.vmid)).toEqual([120, 121]);
    expect(cluster.inputs('destroyOwnedVm')).toEqual([]);
    expect(cluster.vms.get(120)?.owner).toBe('install-by-someone-else');
  });

  test('an explicit VMID that is taken fails the install without touching that VM', async () => {
    const cluster = new FakeCluster();
    cluster.add({ vmid: 150, owner: 'made-by-hand' });
    const run = t.withActivities(cluster.activities(), () =>
      t.env.client.workflow.execute(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input({ vmid: 150 })] }),
    );

    const err = await run.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(rootCause(err)?.type).toBe('VmidTakenError');
    expect(cluster.inputs('createVm').map((c) => c.vmid)).toEqual([150]);
    expect(cluster.inputs('allocateVmid')).toEqual([]);
    expect(cluster.inputs('destroyOwnedVm')).toEqual([]);
    expect(cluster.vms.get(150)?.owner).toBe('made-by-hand');
  });

  test('a failure after qm create removes the VM this run created, and only that one', async () => {
    const cluster = new FakeCluster();
    const plain = cluster.plain();
    const acts = cluster.activities({
      async allocateVmid(req) {
        const vmid = await plain.allocateVmid(req);
        if (vmid === 120) cluster.add({ vmid: 120, owner: 'install-by-someone-else' });
        return vmid;
      },
      async importDisk() {
        throw new StorageError({ command: 'qm disk import', node: 'pve1', exitCode: 255, stderr: "storage 'local-lvm' is not available on node 'pve1'" });
      },
    });
    const workflowId = id();
    const { err, page, run } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId, taskQueue: t.taskQueue, args: [input()] });
      return { err: await handle.result().catch((e: unknown) => e), page: await handle.query(progressQuery, 0), run: handle.firstExecutionRunId };
    });

    expect(rootCause(err)?.type).toBe('StorageError');
    expect(cluster.inputs('importDisk')).toHaveLength(1); // non-retryable: tried once
    // This run's VM only: a later run under the same id (a reset) is not its owner.
    expect(cluster.inputs('destroyOwnedVm')).toEqual([{ vmid: 121, owner: workflowId, run }]);
    expect(cluster.vms.has(121)).toBe(false);
    expect(cluster.vms.get(120)?.owner).toBe('install-by-someone-else');
    expect(page.state).toBe('failed');
    expect(page.events.at(-1)).toMatchObject({ step: 'VM creation > import disk', status: 'error' });
    expect(page.events.at(-1)?.message).toContain("storage 'local-lvm' is not available");
  });

  test('a cancelled install removes the VM it created and ends cancelled', async () => {
    const cluster = new FakeCluster();
    const acts = cluster.activities({ waitForSsh: untilCancelled });
    const workflowId = id();
    const { err, page, run } = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId, taskQueue: t.taskQueue, args: [input()] });
      await cluster.called('waitForSsh');
      await handle.cancel();
      return { err: await handle.result().catch((e: unknown) => e), page: await handle.query(progressQuery, 0), run: handle.firstExecutionRunId };
    });

    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(cluster.inputs('destroyOwnedVm')).toEqual([{ vmid: 120, owner: workflowId, run }]);
    expect(cluster.vms.size).toBe(0);
    expect(cluster.sequence()).not.toContain('runInitScript');
    expect(page.state).toBe('cancelled');
    expect(page.events.at(-1)).toMatchObject({ status: 'error', message: '[-] install cancelled' });
  });

  test('a running install\'s stack trace (the Temporal UI\'s) points into workflows/install.ts', async () => {
    // The bundle the worker runs is the slimmed one (worker/bundleOptions.ts): its source
    // map has lost the sources' text, not the positions.
    const cluster = new FakeCluster();
    const acts = cluster.activities({ waitForSsh: untilCancelled });
    const trace = await t.withActivities(acts, async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id(), taskQueue: t.taskQueue, args: [input()] });
      await cluster.called('waitForSsh');
      const stack = await handle.query<string>('__stack_trace');
      await handle.cancel();
      await handle.result().catch(() => undefined);
      return stack;
    });
    expect(trace).toMatch(/workflows\/install\.ts:\d+:\d+/);
  });
});
