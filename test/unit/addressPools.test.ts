import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assignable, checkAddressPools, firstFree, installSpecSchema, ipconfigOf, ipToNumber, numberToIp, poolOfAddress, poolSize } from '../../contract';
import { installAnswer } from '../support/installAnswer';
import { readAddressPools } from '../../lib/addressPools/setting';
import { staticAddressOf, vmAddress } from '../../lib/vm/address';
import type { ProxmoxNode } from '../../lib/proxmox';
import type { VmConfig } from '../../lib/proxmox/vmConfig';
import { loadConfig } from '../../lib/config';

const pool = (over: Record<string, unknown> = {}) => ({ name: 'lab', cidr: '127.1.0.0/24', gateway: '127.1.0.1', ...over });

describe('address pool arithmetic', () => {
  test('addresses round-trip through numbers', () => {
    for (const ip of ['0.0.0.0', '127.1.0.1', '255.255.255.255', '10.20.30.40']) expect(numberToIp(ipToNumber(ip))).toBe(ip);
  });

  test.each([
    ['127.1.0.0/24', '127.1.0.1', 253],
    ['127.2.0.0/23', '127.2.0.1', 509],
    ['127.3.0.0/30', '127.3.0.1', 1],
    ['127.4.0.0/16', '127.4.255.254', 65533],
  ])('%s with gateway %s hands out %d addresses', (cidr, gateway, size) => {
    const { pools, problems } = checkAddressPools([pool({ cidr, gateway })]);
    expect(problems).toEqual([]);
    expect(poolSize(pools[0])).toBe(size);
  });

  test('network, broadcast, gateway and reserved addresses are never handed out', () => {
    const { pools } = checkAddressPools([pool({ reserved: ['127.1.0.2', '127.1.0.10-127.1.0.19', '127.1.0.1'] })]);
    const p = pools[0];
    for (const ip of ['127.1.0.0', '127.1.0.255', '127.1.0.1', '127.1.0.2', '127.1.0.10', '127.1.0.19']) expect(assignable(p, ipToNumber(ip))).toBe(false);
    for (const ip of ['127.1.0.3', '127.1.0.9', '127.1.0.20', '127.1.0.254']) expect(assignable(p, ipToNumber(ip))).toBe(true);
    // 253 less 11 reserved (the gateway, reserved twice, counted once).
    expect(poolSize(p)).toBe(242);
    expect(firstFree(p, new Set())).toBe('127.1.0.3');
    expect(firstFree(p, new Set(['127.1.0.3', '127.1.0.4']))).toBe('127.1.0.5');
  });

  test('a full pool has no free address', () => {
    const { pools } = checkAddressPools([pool({ cidr: '127.3.0.0/30', gateway: '127.3.0.1' })]);
    expect(firstFree(pools[0], new Set(['127.3.0.2']))).toBeUndefined();
  });

  test('the pool of an address, and ipconfig0 for it', () => {
    const { pools } = checkAddressPools([pool(), pool({ name: 'big', cidr: '127.2.0.0/23', gateway: '127.2.0.1' })]);
    expect(poolOfAddress(pools, '127.2.1.7')?.name).toBe('big');
    expect(poolOfAddress(pools, '127.0.0.7')).toBeUndefined();
    expect(poolOfAddress(pools, 'dhcp')).toBeUndefined();
    expect(ipconfigOf('127.2.1.7', pools[1])).toBe('ip=127.2.1.7/23,gw=127.2.0.1');
  });

  test('every problem is one line naming the pool', () => {
    const { problems } = checkAddressPools([
      pool(),
      pool({ name: 'lab' }),
      pool({ name: 'Bad_Name' }),
      pool({ name: 'hostbits', cidr: '127.5.0.1/24', gateway: '127.5.0.2' }),
      pool({ name: 'gw', cidr: '127.6.0.0/24', gateway: '127.7.0.1' }),
      pool({ name: 'gwnet', cidr: '127.6.0.0/24', gateway: '127.6.0.0' }),
      pool({ name: 'overlap', cidr: '127.1.0.128/25', gateway: '127.1.0.129' }),
      pool({ name: 'res', cidr: '127.8.0.0/24', gateway: '127.8.0.1', reserved: ['127.9.0.1', '127.8.0.9-127.8.0.3', 'x'] }),
      pool({ name: 'wide', cidr: '127.0.0.0/4', gateway: '127.0.0.1' }),
    ]);
    expect(problems).toEqual([
      "ADDRESS_POOLS: pool 'lab' is named twice",
      "ADDRESS_POOLS: pool name 'Bad_Name' must be lower-case letters, digits and -, at most 63 characters",
      "ADDRESS_POOLS: pool 'hostbits' has cidr '127.5.0.1/24' with host bits set: the network is 127.5.0.0/24",
      "ADDRESS_POOLS: pool 'gw' has gateway '127.7.0.1' outside 127.6.0.0/24 (or its network or broadcast address)",
      "ADDRESS_POOLS: pool 'gwnet' has gateway '127.6.0.0' outside 127.6.0.0/24 (or its network or broadcast address)",
      "ADDRESS_POOLS: pool 'overlap' (127.1.0.128/25) overlaps pool 'lab' (127.1.0.0/24)",
      "ADDRESS_POOLS: pool 'res' has reserved entry '127.9.0.1' outside 127.8.0.0/24",
      "ADDRESS_POOLS: pool 'res' has reserved entry '127.8.0.9-127.8.0.3': it must be an address or a range like 192.0.2.10-192.0.2.20",
      "ADDRESS_POOLS: pool 'res' has reserved entry 'x': it must be an address or a range like 192.0.2.10-192.0.2.20",
      "ADDRESS_POOLS: pool 'wide' has cidr '127.0.0.0/4': it must be an IPv4 network like 192.0.2.0/24, with a prefix from /8 to /30",
    ]);
  });
});

describe('ADDRESS_POOLS', () => {
  test('unset or empty: no pools', () => {
    const problems: string[] = [];
    expect(readAddressPools(undefined, problems)).toEqual([]);
    expect(readAddressPools('  ', problems)).toEqual([]);
    expect(problems).toEqual([]);
  });

  test('a JSON list, or a file holding one', () => {
    const json = JSON.stringify([pool({ bridge: 'vmbr1', vlan: 20 })]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pools-')), 'pools.json');
    fs.writeFileSync(file, json);
    for (const value of [json, file]) {
      const problems: string[] = [];
      expect(readAddressPools(value, problems).map((p) => [p.name, p.prefix, p.bridge, p.vlan])).toEqual([['lab', 24, 'vmbr1', 20]]);
      expect(problems).toEqual([]);
    }
  });

  test.each([
    ['[not json', 'ADDRESS_POOLS: is not JSON'],
    ['/nonexistent/pools.json', 'ADDRESS_POOLS: cannot read /nonexistent/pools.json (ENOENT)'],
    ['[]', 'ADDRESS_POOLS: list:'],
    ['[{"name":"lab","cidr":"127.1.0.0/24"}]', 'ADDRESS_POOLS: 0.gateway:'],
    ['[{"name":"lab","cidr":"127.1.0.0/24","gateway":"127.1.0.1","vlan":5000}]', 'ADDRESS_POOLS: 0.vlan:'],
    ['[{"name":"lab","cidr":"127.1.0.0/24","gateway":"127.1.0.1","extra":1}]', 'ADDRESS_POOLS: 0:'],
  ])('%s is refused at start', (value, start) => {
    const problems: string[] = [];
    readAddressPools(value, problems);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.some((p) => p.startsWith(start))).toBe(true);
  });

  test('the configuration carries the pools, and lifts the VMID cap of the /24 formula', () => {
    const config = loadConfig({ ADDRESS_POOLS: JSON.stringify([pool()]), ASSIGN_IP_START: '100', ASSIGN_IP_END: '2000' });
    expect(config.addressPools.map((p) => p.name)).toEqual(['lab']);
    expect(config.vmidRange).toEqual({ start: 100, end: 2000 });
    const seed = loadConfig({ ASSIGN_IP_START: '100', ASSIGN_IP_END: '2000' });
    expect(seed.addressPools).toEqual([]);
    expect(seed.vmidRange).toEqual({ start: 100, end: 254 });
  });

  test('a bad pool stops the start with its line', () => {
    expect(() => loadConfig({ ADDRESS_POOLS: JSON.stringify([pool({ gateway: '127.9.0.1' })]) })).toThrow(/ADDRESS_POOLS: pool 'lab' has gateway '127\.9\.0\.1' outside/);
  });
});

describe("an existing VM's address", () => {
  test('ipconfig0 with a static address gives it (a pool lease); dhcp is the agent\'s to say; otherwise the /24 formula', async () => {
    const noAgent = { agentNetworkInterfaces: () => Promise.reject(new Error('QEMU guest agent is not running')) } as unknown as ProxmoxNode;
    const conf = (entries: Record<string, string>) => ({ entries, disks: [] }) as unknown as VmConfig;
    expect(await vmAddress('127.0.0.1', noAgent, 300, conf({ ipconfig0: 'ip=127.2.1.7/23,gw=127.2.0.1' }))).toBe('127.2.1.7');
    expect(await vmAddress('127.0.0.1', noAgent, 300, conf({ ipconfig0: 'gw=127.2.0.1,ip=127.2.1.8/23' }))).toBe('127.2.1.8');
    expect(await vmAddress('127.0.0.1', noAgent, 130, conf({ ipconfig0: 'ip=dhcp', net0: 'virtio=BC:24:11:00:00:01,bridge=vmbr0' }))).toBeUndefined();
    expect(await vmAddress('192.0.2.1', noAgent, 130, conf({}))).toBe('192.0.2.130');
    expect(staticAddressOf('ip6=dhcp')).toBeUndefined();
    expect(staticAddressOf('ip=dhcp')).toBeUndefined();
  });
});

describe("the API's address fields", () => {
  const base = { os: 'debian', version: '12' };
  const { pools } = checkAddressPools([pool({ reserved: ['127.1.0.2-127.1.0.9'] }), pool({ name: 'big', cidr: '127.2.0.0/23', gateway: '127.2.0.1' })]);
  const withPools = (body: Record<string, unknown>) => installAnswer({ ...base, ...body }, { addressPools: pools });

  test('without pools a seed body is what it was: ip ignored, addressPool refused, id within the /24', () => {
    expect(installAnswer({ ...base, ip: '10.0.0.5', gateway: '10.0.0.1' })).toEqual(installAnswer(base));
    expect(installAnswer({ ...base, ip: '10.0.0.5' })).not.toHaveProperty('ip');
    expect(installAnswer({ ...base, addressPool: 'lab' })).toBe('addressPool: no address pools are configured (ADDRESS_POOLS)');
    expect(installAnswer({ ...base, id: 255 })).toBe('id: must be at most 254');
  });

  test('with pools: the first pool by default, the one named, the one holding ip; any VMID', () => {
    expect(withPools({})).toMatchObject({ addressPool: 'lab' });
    expect(withPools({ addressPool: 'big' })).toMatchObject({ addressPool: 'big' });
    expect(withPools({ ip: '127.2.1.7' })).toMatchObject({ addressPool: 'big', ip: '127.2.1.7' });
    expect(withPools({ ip: '127.2.1.7', addressPool: 'big', id: 100000 })).toMatchObject({ addressPool: 'big', ip: '127.2.1.7', vmid: 100000 });
  });

  test.each([
    [{ addressPool: 'nope' }, "addressPool: no address pool named 'nope' (configured: lab, big)"],
    [{ addressPool: 7 }, 'addressPool: must be a string'],
    [{ ip: '127.9.0.1' }, 'ip: 127.9.0.1 is in no address pool (configured: lab 127.1.0.0/24, big 127.2.0.0/23)'],
    [{ ip: '127.1.0.255' }, "ip: 127.1.0.255 is never handed out by address pool 'lab' (its network, broadcast or gateway address, or reserved)"],
    [{ ip: '127.1.0.3' }, "ip: 127.1.0.3 is never handed out by address pool 'lab' (its network, broadcast or gateway address, or reserved)"],
    [{ ip: '127.1.0.30', addressPool: 'big' }, "ip: 127.1.0.30 is in address pool 'lab', not 'big'"],
    [{ ip: '127.01.0.30' }, 'ip: must be an IPv4 address like 192.0.2.10'],
    [{ ip: 'dhcp6' }, 'ip: must be "dhcp" (the address is read from the guest agent) or an IPv4 address of an address pool'],
    [{ ip: 'dhcp', addressPool: 'lab' }, 'addressPool: goes with a static address, not with ip "dhcp"'],
  ])('%j is a 400: %s', (body, problem) => {
    expect(withPools(body)).toBe(problem);
  });

  test('a spec the worker gets holds ip only with its pool, and a VMID above 254 only with a pool', () => {
    expect(installSpecSchema.safeParse({ ...base, cores: 1, ramMb: 512, diskGb: 16, user: 'debian', ip: '127.1.0.30' }).success).toBe(false);
    expect(installSpecSchema.safeParse({ ...base, cores: 1, ramMb: 512, diskGb: 16, user: 'debian', vmid: 300 }).success).toBe(false);
    expect(installSpecSchema.safeParse({ ...base, cores: 1, ramMb: 512, diskGb: 16, user: 'debian', vmid: 300, addressPool: 'lab', ip: '127.1.0.30' }).success).toBe(true);
  });
});
