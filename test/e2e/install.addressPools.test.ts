import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';
import { portAnswers } from '../../lib/network';
import { waitFor } from '../../sandbox/testkit';

/**
 * Address pools (issue 24) end to end: two loopback pools outside GATEWAY's /24 (127.0.0.1
 * here), 253 + 509 addresses. Twenty installs at once get twenty distinct addresses, each
 * VM answering SSH on its own; one asks for an address and a VMID above 254; the list and
 * GET /api/address-pools show the leases, destroy gives the address back, and bad values
 * are 400s naming the field. (Installs without pools, the seed's formula, are every other
 * install test.)
 */

let h: Harness;
const POOLS = [
  { name: 'lab', cidr: '127.1.0.0/24', gateway: '127.1.0.1', reserved: ['127.1.0.2-127.1.0.9'] },
  { name: 'big', cidr: '127.2.0.0/23', gateway: '127.2.0.1', bridge: 'vmbr1' },
];

beforeAll(async () => {
  h = await startHarness({ ADDRESS_POOLS: JSON.stringify(POOLS) }, { bridges: { pve1: ['vmbr0', 'vmbr1'], pve2: ['vmbr0', 'vmbr1'] } });
});

afterAll(async () => {
  await h?.stop();
});

const get = (p: string) => apiCall(h.api, 'GET', p);
const post = (p: string, body?: unknown) => apiCall(h.api, 'POST', p, body);
const config = async (vmid: number) => parseVmConfig((await h.sandbox.readConfig(vmid))!);

interface Installed {
  vmid: number;
  ip: string;
}

async function install(body: Record<string, unknown>): Promise<Installed> {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ...body } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const vm = res.events.map((e) => /VMID (\d+), IP ([\d.]+),/.exec(e.message)).find(Boolean);
  if (!vm) throw new Error(`no VMID in the install's answer: ${JSON.stringify(res).slice(0, 800)}`);
  return { vmid: Number(vm[1]), ip: vm[2] };
}

let installed: Installed[] = [];

test('twenty installs at once get twenty distinct pool addresses, and each VM answers SSH on its own', async () => {
  installed = await Promise.all(Array.from({ length: 20 }, (_, i) => install(i % 2 === 0 ? {} : { addressPool: 'big' })));
  const ips = installed.map((v) => v.ip);
  expect(new Set(ips).size).toBe(20);
  expect(ips.filter((ip) => ip.startsWith('127.0.0.'))).toEqual([]);
  expect(ips.filter((ip) => ip.startsWith('127.1.0.'))).toHaveLength(10);
  expect(ips.filter((ip) => ip.startsWith('127.2.'))).toHaveLength(10);
  // The reserved range and the gateway stay free.
  expect(ips.filter((ip) => /^127\.1\.0\.[0-9]$/.test(ip))).toEqual([]);
  for (const vm of installed) {
    expect(await portAnswers(vm.ip, h.config.vmSshPort)).toBe(true);
    const conf = await config(vm.vmid);
    const big = vm.ip.startsWith('127.2.');
    expect(conf.entries.ipconfig0).toBe(big ? `ip=${vm.ip}/23,gw=127.2.0.1` : `ip=${vm.ip}/24,gw=127.1.0.1`);
    expect(conf.entries.net0).toMatch(big ? /bridge=vmbr1/ : /bridge=vmbr0/);
  }
});

test('the list and GET /api/address-pools show the leases', async () => {
  const list = await get('/vm/list');
  expect(list.status).toBe(200);
  for (const vm of installed) {
    expect(list.json.list.find((e: { vmid: number }) => e.vmid === vm.vmid)).toMatchObject({ ip: vm.ip, address_pool: vm.ip.startsWith('127.2.') ? 'big' : 'lab' });
  }
  const pools = await get('/address-pools');
  expect(pools.status).toBe(200);
  expect(pools.json.pools.map((p: { name: string; size: number; used: number; free: number }) => [p.name, p.size, p.used, p.free])).toEqual([
    ['lab', 245, 10, 235],
    ['big', 509, 10, 499],
  ]);
});

test('one address asked for, with a VMID above 254; a start finds the VM on that address', async () => {
  const vm = await install({ ip: '127.2.1.200', id: 1000 });
  expect(vm).toEqual({ vmid: 1000, ip: '127.2.1.200' });
  expect(await portAnswers('127.2.1.200', h.config.vmSshPort)).toBe(true);
  // An operation on the existing VM reads its address from ipconfig0.
  expect((await post('/vm/1000/stop')).status).toBe(200);
  // pvestatd's lag: the API sees the stop a moment later.
  await waitFor('VM 1000 to stop', async () => (await get('/vm/1000/status')).json === 'stopped', 5_000);
  const start = await requestSse(`${h.api}/vm/1000/start`, { method: 'POST' });
  expect(start.status).toBe(200);
  expect(start.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(start.events.map((e) => e.message)).toEqual(expect.arrayContaining([expect.stringContaining('waiting for SSH on 127.2.1.200')]));
  installed.push(vm);
});

test('destroy gives the address back', async () => {
  const vm = installed[0];
  expect((await post(`/vm/${vm.vmid}/stop`)).status).toBe(200);
  expect((await post(`/vm/${vm.vmid}/destroy`)).status).toBe(200);
  const pools = await get('/address-pools');
  const leases = pools.json.pools.flatMap((p: { leases: Array<{ address: string; vmid: number }> }) => p.leases);
  expect(leases.find((l: { vmid: number }) => l.vmid === vm.vmid)).toBeUndefined();
  // The next install of the pool may have it again (the lowest free address).
  expect(await install({ ip: vm.ip })).toMatchObject({ ip: vm.ip });
});

test.each([
  [{ addressPool: 'nope' }, /^addressPool: no address pool named 'nope'/],
  [{ addressPool: 'Bad Name' }, /^addressPool: /],
  [{ ip: '127.5.0.1' }, /^ip: 127\.5\.0\.1 is in no address pool/],
  [{ ip: '127.1.0.1' }, /^ip: 127\.1\.0\.1 is never handed out/],
  [{ ip: '127.1.0.5' }, /^ip: 127\.1\.0\.5 is never handed out/],
  [{ ip: '127.2.0.7', addressPool: 'lab' }, /^ip: 127\.2\.0\.7 is in address pool 'big', not 'lab'/],
  [{ ip: 'not-an-ip' }, /^ip: /],
  [{ ip: 7 }, /^ip: /],
])('%j is a 400 naming the field', async (body, message) => {
  const res = await post('/vm/install', { os: 'debian', version: '12', ...body });
  expect(res.status).toBe(400);
  // `please check your input: <field>: <rule>`, as every 400 of the install body.
  expect(res.json.message).toMatch(new RegExp(`: ${message.source.slice(1)}`));
});

test('an address already leased fails the install with the lease named, and nothing is left behind', async () => {
  const taken = installed[1].ip;
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ip: taken } });
  expect(res.events.at(-1)).toMatchObject({ status: 'error', message: expect.stringMatching(new RegExp(`${taken.replace(/\./g, '\\.')} is leased to VM ${installed[1].vmid}`)) });
});
