import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dhcpLease, leaseNetwork, qemuGaInterfaces, wantsDhcp } from '../../sandbox/state/dhcp';
import { agentAddressesAsForwarded } from '../../sandbox/qemu/network';
import { guestInterfacesOf, guestIpv4Of } from '../../lib/proxmox/guestAgent';
import type { VmConf } from '../../sandbox/state/vmconf';

/** The sandbox's DHCP stand-in, its agent's answer and the translation real guests' answers go through. */

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dhcp-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const conf = (props: Record<string, string>) => ({ props }) as unknown as VmConf;

test('a lease per MAC, kept, never in GATEWAY\'s /24', () => {
  const a = dhcpLease(dir, 'BC:24:11:00:00:01', '127.0.0.1');
  const b = dhcpLease(dir, 'bc:24:11:00:00:02', '127.0.0.1');
  expect(a).toMatch(/^127\.0\.3\.\d+$/);
  expect(b).not.toBe(a);
  expect(dhcpLease(dir, 'bc:24:11:00:00:01', '127.0.0.1')).toBe(a);
  expect(leaseNetwork('127.0.3.1')).toBe('127.0.4');
});

test('only ipconfig0 ip=dhcp asks for DHCP', () => {
  expect(wantsDhcp(conf({ ipconfig0: 'ip=dhcp' }))).toBe(true);
  expect(wantsDhcp(conf({ ipconfig0: 'ip=127.0.0.120/24,gw=127.0.0.1' }))).toBe(false);
  // A gateway with DHCP gives the interface no subnets in qemu-server: no DHCP either.
  expect(wantsDhcp(conf({ ipconfig0: 'ip=dhcp,gw=127.0.0.1' }))).toBe(false);
});

test("the stand-in agent's answer is qemu-ga's shape: lo first, net0's MAC, what QemuRun reads from it", () => {
  const answer = qemuGaInterfaces({ mac: 'BC:24:11:5E:7A:01', address: '127.0.3.10' });
  const nics = guestInterfacesOf(answer);
  expect(nics.map((n) => n.name)).toEqual(['lo', 'eth0']);
  expect(nics[1]).toMatchObject({ mac: 'bc:24:11:5e:7a:01', addresses: [{ type: 'ipv4', address: '127.0.3.10', prefix: 24 }, { type: 'ipv6', address: 'fe80::be24:11ff:fe5e:7a01', prefix: 64 }] });
  expect(guestIpv4Of(nics, 'BC:24:11:5E:7A:01')).toBe('127.0.3.10');
});

test("a real guest's agent reports the loopback address forwarded to it in place of slirp's 10.0.2.15", () => {
  const real = [
    { name: 'lo', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '127.0.0.1', prefix: 8 }] },
    { name: 'ens18', 'hardware-address': 'bc:24:11:5e:7a:01', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '10.0.2.15', prefix: 24 }] },
  ];
  const translated = agentAddressesAsForwarded(real, '127.0.3.11');
  expect(guestIpv4Of(guestInterfacesOf(translated), 'bc:24:11:5e:7a:01')).toBe('127.0.3.11');
  expect(agentAddressesAsForwarded(real, undefined)).toBe(real);
});
