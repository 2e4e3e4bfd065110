import { checkAddressPools, leaseHolderOf, leaseVerdict, type LeaseFacts } from '../../contract';
import { readAddressPools } from '../../lib/addressPools/setting';

const facts = (over: Partial<LeaseFacts> = {}): LeaseFacts => ({ owner: 'install-a', ownerState: 'COMPLETED', vmid: 120, address: '192.0.2.10', ...over });

describe('leaseVerdict: a lease goes back only when its owner runs no more and no VM uses the address', () => {
  test.each<[string, Partial<LeaseFacts>, 'keep' | 'release', RegExp]>([
    ['owner running, no VM yet (between lease and qm create)', { ownerState: 'RUNNING' }, 'keep', /is running/],
    ['owner not read', { ownerState: undefined, ownerUnread: 'deadline exceeded' }, 'keep', /could not be read/],
    ['VM uses it', { vm: { template: false, address: '192.0.2.10' } }, 'keep', /VM 120 uses it/],
    ['VM gone, owner completed', {}, 'release', /VM 120 is gone and its owner install-a closed as completed/],
    ['VM gone, owner terminated', { ownerState: 'TERMINATED' }, 'release', /closed as terminated/],
    ['VM gone, owner forgotten', { ownerState: 'UNKNOWN_TO_NAMESPACE' }, 'release', /unknown to the namespace/],
    ['another VM at the VMID', { vm: { template: false, address: '192.0.2.99' } }, 'release', /is another VM/],
    ['the VM is a template', { vm: { template: true, address: '192.0.2.10' } }, 'release', /is a template/],
  ])('%s: %s', (_what, over, action, reason) => {
    const v = leaseVerdict(facts(over));
    expect(v.action).toBe(action);
    expect(v.reason).toMatch(reason);
  });
});

test('maxLeasesPerHolder: a whole number of at least 1, or absent for no limit', () => {
  const base = { name: 'lab', cidr: '192.0.2.0/24', gateway: '192.0.2.1' };
  expect(checkAddressPools([{ ...base, maxLeasesPerHolder: 3 }]).problems).toEqual([]);
  expect(checkAddressPools([{ ...base, maxLeasesPerHolder: 0 }]).problems).toEqual([expect.stringMatching(/^ADDRESS_POOLS: pool 'lab' has maxLeasesPerHolder 0: it must be a whole number of at least 1/)]);
  const problems: string[] = [];
  readAddressPools(JSON.stringify([{ ...base, maxLeasesPerHolder: 1.5 }]), problems);
  expect(problems).toEqual([expect.stringMatching(/^ADDRESS_POOLS: 0\.maxLeasesPerHolder: /)]);
});

test('the quota counts by the tenant the install is for, or one anonymous holder', () => {
  expect(leaseHolderOf('web')).toBe('tenant:web');
  expect(leaseHolderOf(undefined)).toBe('anonymous');
});
