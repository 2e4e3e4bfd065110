import { WorkflowUpdateFailedError } from '@temporalio/client';
import { addressLeasesQuery, addressPoolWorkflowId, allocateAddressUpdate, checkAddressPools, releaseAddressUpdate } from '../../contract';
import { addressPoolActivities } from '../../activities/addressPools';
import type { Config } from '../../lib/config';
import { FakeCluster } from './support/fakeCluster';
import { describeWorkflows, startWorkflowTestEnv, type WorkflowTestEnv } from './support/testEnv';

let t: WorkflowTestEnv;
const setting = { name: 'lab', cidr: '127.1.0.0/29', gateway: '127.1.0.1', reserved: ['127.1.0.6'] };

/** A fresh pool workflow under its own name, so tests do not share leases. */
async function startPool(name: string) {
  const handle = await t.env.client.workflow.start('addressPool', { workflowId: addressPoolWorkflowId(name), taskQueue: t.taskQueue, args: [{ pool: name, leases: [] }] });
  const pool = { ...setting, name };
  const allocate = (owner: string, extra: { vmid?: number; address?: string } = {}) => handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner, ...extra }] });
  return { handle, allocate };
}

/** The update's own failure type (AddressPoolExhaustedError, …). */
async function failureOf(p: Promise<unknown>): Promise<string | undefined> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  return ((err as WorkflowUpdateFailedError).cause as { type?: string } | undefined)?.type;
}

describeWorkflows('address pool workflow (time-skipping server)', () => {
  beforeAll(async () => {
    t = await startWorkflowTestEnv();
  });
  afterAll(async () => {
    await t?.teardown();
  });

  test('concurrent allocations get distinct addresses until the pool is full', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle, allocate } = await startPool('full');
      // /29 with gateway .1 and .6 reserved: .2 .3 .4 .5 hand out.
      const leases = await Promise.all([0, 1, 2, 3].map((i) => allocate(`install-${i}`, { vmid: 200 + i })));
      expect(new Set(leases.map((l) => l.address)).size).toBe(4);
      expect(leases.map((l) => l.address).sort()).toEqual(['127.1.0.2', '127.1.0.3', '127.1.0.4', '127.1.0.5']);
      expect(await failureOf(allocate('install-4'))).toBe('AddressPoolExhaustedError');
      expect((await handle.query(addressLeasesQuery)).leases).toHaveLength(4);
    });
  });

  test('a retried allocation gets the same address; a re-created VMID keeps its address', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { allocate } = await startPool('retry');
      const first = await allocate('install-a', { vmid: 300 });
      expect(await allocate('install-a', { vmid: 300 })).toEqual(first);
      // A VMID taken meanwhile: the same install asks again for its next VMID.
      expect(await allocate('install-a', { vmid: 301 })).toMatchObject({ address: first.address, vmid: 301 });
      // Another install racing for VMID 301 does not take the lease; a rebuild's install,
      // naming the VM's address, re-creates VM 301 on it.
      expect((await allocate('install-racer', { vmid: 301 })).address).not.toBe(first.address);
      expect(await allocate('install-rebuild', { vmid: 301, address: first.address })).toMatchObject({ address: first.address, owner: 'install-rebuild' });
      expect((await allocate('install-b', { vmid: 302 })).address).not.toBe(first.address);
    });
  });

  test('one address asked for: free, taken, or not the pool\'s to hand out', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { allocate } = await startPool('asked');
      expect((await allocate('install-x', { address: '127.1.0.5' })).address).toBe('127.1.0.5');
      expect(await failureOf(allocate('install-y', { address: '127.1.0.5' }))).toBe('AddressTakenError');
      expect(await failureOf(allocate('install-y', { address: '127.1.0.6' }))).toBe('InvalidRequestError');
      expect(await failureOf(allocate('install-y', { address: '127.1.0.1' }))).toBe('InvalidRequestError');
      expect((await allocate('install-y')).address).toBe('127.1.0.2');
    });
  });

  test('a release names the lease (address and generation) and frees the address for the next install; a second release finds nothing', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle, allocate } = await startPool('release');
      const a = await allocate('install-1', { vmid: 401 });
      const b = await allocate('install-2', { vmid: 402 });
      expect([a.generation, b.generation]).toEqual([1, 2]);
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: a.address, generation: 1 }] })).toEqual([a]);
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: a.address, generation: 1 }] })).toEqual([]);
      expect((await allocate('install-3', { vmid: 403 })).address).toBe(a.address);
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: b.address, generation: 2 }] })).toHaveLength(1);
      expect((await handle.query(addressLeasesQuery)).leases.map((l) => l.owner)).toEqual(['install-3']);
    });
  });

  test('a release sent again, by an attacker with access to the server, leaves the address\'s newer lease alone', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle, allocate } = await startPool('replayed');
      const old = await allocate('install-old', { vmid: 120 });
      const recorded = { address: old.address, generation: old.generation };
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [recorded], updateId: 'release-of-vm-120' })).toEqual([old]);
      // VM 120's VMID and address go to another caller's install.
      const fresh = await allocate('install-new', { vmid: 120 });
      expect(fresh.address).toBe(old.address);
      // The recorded release again: under its own update id, under a new one, and in the form
      // recorded before generations (by VMID, by owner, by address alone).
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [recorded], updateId: 'release-of-vm-120' })).toEqual([old]);
      expect(await handle.executeUpdate(releaseAddressUpdate, { args: [recorded] })).toEqual([]);
      for (const legacy of [{ vmid: 120 }, { owner: 'install-new' }, { address: old.address }]) {
        expect(await failureOf(handle.executeUpdate(releaseAddressUpdate, { args: [legacy] }))).toBe('InvalidRequestError');
      }
      expect((await handle.query(addressLeasesQuery)).leases).toEqual([fresh]);
      // An allocation sent again under its update id is answered, not made again.
      const once = await handle.executeUpdate(allocateAddressUpdate, { args: [{ pool: { ...setting, name: 'replayed' }, owner: 'install-b', vmid: 121 }], updateId: 'allocate-b' });
      await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: once.address, generation: once.generation }] });
      expect(await handle.executeUpdate(allocateAddressUpdate, { args: [{ pool: { ...setting, name: 'replayed' }, owner: 'install-b', vmid: 121 }], updateId: 'allocate-b' })).toEqual(once);
      expect((await handle.query(addressLeasesQuery)).leases).toEqual([fresh]);
    });
  });

  test('a holder gets the leases its pool allows (maxLeasesPerHolder) and no more; other holders still get theirs', async () => {
    await t.withActivities(new FakeCluster().activities(), async () => {
      const { handle } = await startPool('quota');
      const pool = { ...setting, name: 'quota', maxLeasesPerHolder: 2 };
      const allocate = (owner: string, holder: string) => handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner, holder }] });
      const [a] = await Promise.all([allocate('install-a1', 'token:alice'), allocate('install-a2', 'token:alice')]);
      const refused = await handle.executeUpdate(allocateAddressUpdate, { args: [{ pool, owner: 'install-a3', holder: 'token:alice' }] }).catch((e: WorkflowUpdateFailedError) => e.cause);
      expect(refused).toMatchObject({ type: 'AddressQuotaError', message: expect.stringMatching(/address pool 'quota' allows 2 lease\(s\) per holder .* token:alice holds 2/) });
      // Asked again, an install gets the lease it holds; another holder gets a new one.
      expect(await allocate('install-a1', 'token:alice')).toEqual(a);
      expect((await allocate('install-b1', 'token:bob')).holder).toBe('token:bob');
      // A lease given back makes room.
      await handle.executeUpdate(releaseAddressUpdate, { args: [{ address: a.address, generation: a.generation }] });
      expect((await allocate('install-a3', 'token:alice')).owner).toBe('install-a3');
    });
  });

  test('the activities start the pool with update-with-start and release in every pool', async () => {
    const { pools } = checkAddressPools([{ name: 'uws', cidr: '127.3.0.0/24', gateway: '127.3.0.1', bridge: 'vmbr9', vlan: 7 }, { name: 'unused', cidr: '127.4.0.0/24', gateway: '127.4.0.1' }]);
    const config = { addressPools: pools, temporal: { taskQueue: t.taskQueue } } as unknown as Config;
    const acts = addressPoolActivities({ config, client: t.env.client });
    await t.withActivities(new FakeCluster().activities(), async () => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => acts.allocateAddress({ pool: 'uws', owner: `install-${i}`, vmid: 500 + i })));
      expect(new Set(results.map((r) => r.address)).size).toBe(20);
      expect(results[0]).toMatchObject({ pool: 'uws', bridge: 'vmbr9', vlan: 7 });
      expect(results[0].ipconfig).toMatch(/^ip=127\.3\.0\.\d+\/24,gw=127\.3\.0\.1$/);
      expect(await acts.allocateAddress({ pool: 'uws', owner: 'install-3', vmid: 503 })).toEqual(results[3]);
      expect(await acts.releaseAddress({ vmid: 503 })).toEqual([results[3].address]);
      expect(await acts.releaseAddress({ vmid: 503 })).toEqual([]);
      expect(await acts.releaseAddress({ owner: 'install-4' })).toEqual([results[4].address]);
      // One lease by name: released once, then another lease of the address is not touched.
      const lease = (await t.env.client.workflow.getHandle(addressPoolWorkflowId('uws')).query(addressLeasesQuery)).leases.find((l) => l.owner === 'install-5')!;
      const named = { pool: 'uws', address: lease.address, generation: lease.generation! };
      expect(await acts.releaseLease(named)).toEqual([lease.address]);
      expect((await acts.allocateAddress({ pool: 'uws', owner: 'install-again', vmid: 600, address: lease.address })).address).toBe(lease.address);
      // Sent again (its update id is the lease's): the first answer, and the new lease stays.
      expect(await acts.releaseLease(named)).toEqual([lease.address]);
      expect(await acts.releaseAddress({ owner: 'install-again' })).toEqual([lease.address]);
      await expect(acts.allocateAddress({ pool: 'nope', owner: 'install-x' })).rejects.toMatchObject({ type: 'InvalidRequestError' });
    });
  });
});
