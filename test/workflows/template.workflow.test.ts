import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { installVm } from '../../workflows/install';
import { buildTemplate } from '../../workflows/template';
import { type InstallInput, type InstallSpec, progressQuery } from '../../contract';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

const spec: InstallSpec = { os: 'debian', version: '12', cores: 2, ramMb: 2048, diskGb: 20, user: 'admin' };
const input = (over: Partial<InstallSpec> = {}): InstallInput => ({ spec: { ...spec, ...over }, secrets: { passwd: 'cloud-pass' } });

let t: WorkflowTestEnv;
let n = 0;
const id = (what: string) => `${what}-test-${++n}`;

function rootCause(err: unknown): ApplicationFailure | undefined {
  let cur = err;
  while (cur instanceof WorkflowFailedError || cur instanceof ActivityFailure) cur = cur.cause;
  return cur instanceof ApplicationFailure ? cur : undefined;
}

describeWorkflows('buildTemplate and installs that clone (time-skipping server, fake activities)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  async function build(cluster: FakeCluster) {
    return t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(buildTemplate, { workflowId: id('template-debian-12'), taskQueue: t.taskQueue, args: [{ os: 'debian', version: '12' }] });
      return { result: await handle.result(), page: await handle.query(progressQuery, 0) };
    });
  }

  test('builds the template: image, VM, the shared part of the init script, cleaned, shut down, qm template, older ones retired', async () => {
    const cluster = new FakeCluster();
    const { result, page } = await build(cluster);
    expect(cluster.sequence()).toEqual([
      'templateRecipe', 'checkStorage', 'clusterCpuType', 'downloadImage', 'stageImage', 'servicePublicKey', 'allocateVmid', 'leaseBuildAddress', 'createVm',
      'importDisk', 'configureVm', 'startVm', 'waitForSsh', 'waitForCloudInit', 'runInitScript', 'runInitScript', 'shutdownVm', 'convertToTemplate', 'retireTemplates',
    ]);
    expect(cluster.inputs('runInitScript').map((i) => (i as { phase?: string }).phase)).toEqual(['template', 'seal']);
    expect(cluster.inputs('createVm')[0]).toMatchObject({ name: 'tpl-debian-12-120', spec: { diskGb: 16, user: 'debian', tags: ['qemurun-template'] } });
    expect(cluster.inputs('convertToTemplate')[0]).toMatchObject({ vmid: 120, marker: { os: 'debian', version: '12', storage: 'local-lvm', recipe: 'recipe-1' } });
    expect(result).toMatchObject({ vmid: 120, name: 'tpl-debian-12-120', recipe: 'recipe-1', retired: [], kept: [] });
    expect(page.state).toBe('completed');
    expect(page.events.at(-1)?.message).toMatch(/^\[\+\] template tpl-debian-12-120 \(VMID 120\) built in \d+\.\d{2}s$/);
  });

  test('an install clones the current template: no image, no reboot, the per-VM part of the init script; the same four final events', async () => {
    const cluster = new FakeCluster();
    await build(cluster);
    cluster.calls.length = 0;
    const { result, page } = await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id('install'), taskQueue: t.taskQueue, args: [input({ name: 'web' })] });
      return { result: await handle.result(), page: await handle.query(progressQuery, 0) };
    });
    // The preparation side by side, in whichever order the worker starts it; no image.
    const sequence = cluster.sequence();
    expect([...sequence.slice(0, 4)].sort()).toEqual(['checkStorage', 'clusterCpuType', 'findTemplate', 'servicePublicKey']);
    expect(sequence.slice(4)).toEqual(['allocateVmid', 'cloneVm', 'configureVm', 'startVm', 'waitForSsh', 'runInitScript']);
    expect(cluster.inputs('cloneVm')[0]).toMatchObject({ vmid: 121, name: 'web-121', template: { vmid: 120, linked: true } });
    expect(cluster.inputs('configureVm')[0]).not.toHaveProperty('volid');
    expect(cluster.inputs('runInitScript')[0]).toMatchObject({ phase: 'clone', afterCloudInit: true });
    expect(result).toMatchObject({ vmid: 121, name: 'web-121' });
    const messages = page.events.map((e) => `${e.step}: ${e.message}`);
    expect(messages).toContainEqual(expect.stringMatching(/^preparation > template: \[\*\] installing as a linked clone of template tpl-debian-12-120 \(VMID 120, built /));
    expect(page.events.slice(-4).map((e) => [e.step, e.message.replace(/\d+\.\d{2}s$/, 'Ns')])).toEqual([
      ['VM initialization > finalizing', '[+] VM installation completed in Ns'],
      ['VM initialization > finalizing', '[*] VMID: 121'],
      ['VM initialization > finalizing', '[*] IP: 10.10.0.121'],
      ['VM initialization > finalizing', '[*] User: admin'],
    ]);
  });

  test('source "image" builds from the image although a template exists; no template: the image, saying why', async () => {
    const cluster = new FakeCluster();
    await build(cluster);
    cluster.calls.length = 0;
    const run = (over: Partial<InstallSpec>) =>
      t.withActivities(cluster.activities(), async () => {
        const handle = await t.env.client.workflow.start(installVm, { workflowId: id('install'), taskQueue: t.taskQueue, args: [input(over)] });
        await handle.result();
        return (await handle.query(progressQuery, 0)).events.map((e) => e.message);
      });
    const asked = await run({ source: 'image' });
    expect(asked).toContain('[*] building from the cloud image, as asked (source "image")');
    expect(cluster.sequence()).not.toContain('findTemplate');
    expect(cluster.sequence()).toContain('importDisk');
    cluster.calls.length = 0;
    // No template of the OS version at all: the seed's events, one for one.
    const none = await run({ version: '13' });
    expect(none.filter((m) => /template/.test(m))).toEqual([]);
    expect(cluster.sequence()).toContain('createVm');
  });

  test('source "template" without a template fails with TemplateNotFoundError before creating anything', async () => {
    const cluster = new FakeCluster();
    const err = await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id('install'), taskQueue: t.taskQueue, args: [input({ source: 'template' })] });
      const failed = await handle.result().catch((e: unknown) => e);
      // The error names the template lookup, not the step started last beside it.
      expect((await handle.query(progressQuery, 0)).events.at(-1)).toMatchObject({ step: 'preparation > template', status: 'error' });
      return failed;
    });
    expect(rootCause(err)).toMatchObject({ type: 'TemplateNotFoundError' });
    expect(rootCause(err)?.message).toMatch(/source "template": no template of debian 12 \(build one with POST \/api\/templates\)/);
    // The steps beside the lookup ran (or were cancelled) too; nothing was created.
    expect([...cluster.sequence()].sort()).toEqual(['checkStorage', 'clusterCpuType', 'findTemplate', 'servicePublicKey']);
  });

  test('a second build keeps the old template while a linked clone uses it, and retires it in the build after', async () => {
    const cluster = new FakeCluster();
    const first = await build(cluster);
    await t.withActivities(cluster.activities(), async () => {
      const handle = await t.env.client.workflow.start(installVm, { workflowId: id('install'), taskQueue: t.taskQueue, args: [input()] });
      await handle.result();
    });
    const second = await build(cluster);
    expect(second.result.kept).toEqual([first.result.vmid]);
    expect(second.page.events.map((e) => e.message)).toContain(`[*] kept VM ${first.result.vmid}: linked clones still use them; a later build retires them`);
    for (const [vmid, vm] of cluster.vms) if (vm.cloneOf !== undefined) cluster.vms.delete(vmid);
    const third = await build(cluster);
    expect(third.result.retired.sort()).toEqual([first.result.vmid, second.result.vmid].sort());
  });

  test("a conversion that fails on the storage's lock is retried; one that keeps failing fails the build, retires nothing and removes its VM", async () => {
    const cluster = new FakeCluster();
    const old = await build(cluster);
    const lockTimeout = () => ApplicationFailure.create({ type: 'StorageLockError', message: "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout" });
    const failing = (times: number) => {
      let failed = 0;
      const real = cluster.plain();
      return cluster.activities({
        async convertToTemplate(input) {
          if (failed++ < times) throw lockTimeout();
          return real.convertToTemplate(input);
        },
      });
    };
    const run = (activities: ReturnType<FakeCluster['activities']>) =>
      t.withActivities(activities, async () => {
        const handle = await t.env.client.workflow.start(buildTemplate, { workflowId: id('template'), taskQueue: t.taskQueue, args: [{ os: 'debian', version: '12' }] });
        return handle.result().catch((e: unknown) => e);
      });

    cluster.calls.length = 0;
    const failed = await run(failing(Infinity));
    expect(rootCause(failed)).toMatchObject({ type: 'StorageLockError' });
    expect(cluster.sequence().filter((a) => a === 'convertToTemplate')).toHaveLength(8);
    expect(cluster.sequence()).not.toContain('retireTemplates');
    expect([...cluster.vms.keys()]).toEqual([old.result.vmid]);

    cluster.calls.length = 0;
    const retried = await run(failing(1));
    expect(retried).toMatchObject({ retired: [old.result.vmid] });
    expect(cluster.sequence().filter((a) => a === 'convertToTemplate')).toHaveLength(2);
  });

  test('a build that fails removes the VM it created', async () => {
    const cluster = new FakeCluster();
    const activities = cluster.activities({
      async runInitScript() {
        throw ApplicationFailure.create({ type: 'InitScriptError', message: 'init script exited with code 1', nonRetryable: true });
      },
    });
    const err = await t.withActivities(activities, async () => {
      const handle = await t.env.client.workflow.start(buildTemplate, { workflowId: id('template'), taskQueue: t.taskQueue, args: [{ os: 'debian', version: '12' }] });
      return handle.result().catch((e: unknown) => e);
    });
    expect(rootCause(err)).toMatchObject({ type: 'InitScriptError' });
    // The VM first, then its address lease (none here: no pools).
    expect(cluster.sequence().slice(-2)).toEqual(['destroyOwnedVm', 'releaseAddress']);
    expect(cluster.vms.size).toBe(0);
  });

  test('with address pools the build leases its address, configures the VM with it, and gives it back once the VM is a template', async () => {
    const cluster = new FakeCluster();
    const lease = { pool: 'lab', address: '192.0.2.100', ipconfig: 'ip=192.0.2.100/24,gw=192.0.2.1' };
    const activities = cluster.activities({
      async leaseBuildAddress() {
        return lease;
      },
    });
    await t.withActivities(activities, async () => {
      const handle = await t.env.client.workflow.start(buildTemplate, { workflowId: id('template-debian-12'), taskQueue: t.taskQueue, args: [{ os: 'debian', version: '12' }] });
      return handle.result();
    });
    expect(cluster.inputs('createVm')[0]).toMatchObject({ address: lease });
    expect(cluster.inputs('configureVm')[0]).toMatchObject({ ip: expect.any(String), ipconfig: lease.ipconfig });
    const seq = cluster.sequence();
    expect(seq.indexOf('releaseAddress')).toBeGreaterThan(seq.indexOf('convertToTemplate'));
    expect(cluster.inputs('releaseAddress')[0]).toMatchObject({ owner: expect.stringMatching(/^template-debian-12-test-/) });
  });
});
