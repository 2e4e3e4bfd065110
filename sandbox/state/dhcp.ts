import fs from 'node:fs';
import { clusterPaths } from './paths';
import { readIfExists, withLock, writeFileAtomic } from './files';
import { parseIpconfig } from './cloudinit';
import type { VmConf } from './vmconf';

/**
 * The sandbox's DHCP server, for guests whose ipconfig0 is `ip=dhcp`: each MAC address
 * gets one loopback address and keeps it (as a DHCP server renews a lease), from a /24
 * that is never GATEWAY's, so nothing finds a DHCP guest where the VMID formula points.
 * The leases are a file of the cluster's state, shared by every node, as one DHCP server
 * on the VM network is.
 */

/** 127.0.3.0/24, or 127.0.4.0/24 when GATEWAY is in the first. */
export function leaseNetwork(gateway: string): string {
  return gateway.startsWith('127.0.3.') ? '127.0.4' : '127.0.3';
}

/** Whether netN's ipconfigN asks for DHCP (what the guest's cloud-init is told). */
export function wantsDhcp(conf: VmConf, index = 0): boolean {
  const value = conf.props[`ipconfig${index}`];
  return value !== undefined && parseIpconfig(value)?.ip === 'dhcp';
}

/** The address leased to `mac`: the one it had, or the lowest free one (.10 to .250). */
export function dhcpLease(dir: string, mac: string, gateway: string): string {
  const file = clusterPaths(dir).dhcpLeases;
  fs.mkdirSync(file.slice(0, file.lastIndexOf('/')), { recursive: true });
  return withLock(`${file}.lock`, 10_000, () => {
    const leases = JSON.parse(readIfExists(file) ?? '{}') as Record<string, string>;
    const key = mac.toLowerCase();
    const net = leaseNetwork(gateway);
    if (leases[key]?.startsWith(`${net}.`)) return leases[key];
    const taken = new Set(Object.values(leases));
    for (let host = 10; host <= 250; host++) {
      const address = `${net}.${host}`;
      if (taken.has(address)) continue;
      writeFileAtomic(file, JSON.stringify({ ...leases, [key]: address }, null, 1));
      return address;
    }
    throw new Error(`the DHCP stand-in has no free address left in ${net}.0/24`);
  });
}

/** What a booted process guest's agent reports: its pid (a stale file is no answer), net0's MAC and its address. */
export interface GuestNetwork {
  pid: number;
  mac?: string;
  address: string;
}

/**
 * `guest-network-get-interfaces` as qemu-ga answers it (qga/commands-posix.c): `lo` first,
 * then the NIC, each with its addresses and statistics; MACs in lower case, as sysfs has
 * them. The guest's IPv6 link-local address is derived from the MAC (EUI-64), as Linux
 * makes it.
 */
export function qemuGaInterfaces(net: Pick<GuestNetwork, 'mac' | 'address'>): unknown[] {
  const stats = { 'rx-bytes': 0, 'rx-dropped': 0, 'rx-errs': 0, 'rx-packets': 0, 'tx-bytes': 0, 'tx-dropped': 0, 'tx-errs': 0, 'tx-packets': 0 };
  const mac = (net.mac ?? '').toLowerCase();
  const nic: Record<string, unknown> = {
    name: 'eth0',
    'ip-addresses': [{ 'ip-address': net.address, 'ip-address-type': 'ipv4', prefix: 24 }, ...(mac ? [{ 'ip-address': linkLocal(mac), 'ip-address-type': 'ipv6', prefix: 64 }] : [])],
    statistics: stats,
    ...(mac ? { 'hardware-address': mac } : {}),
  };
  return [
    {
      name: 'lo',
      'hardware-address': '00:00:00:00:00:00',
      'ip-addresses': [
        { 'ip-address': '127.0.0.1', 'ip-address-type': 'ipv4', prefix: 8 },
        { 'ip-address': '::1', 'ip-address-type': 'ipv6', prefix: 128 },
      ],
      statistics: stats,
    },
    nic,
  ];
}

function linkLocal(mac: string): string {
  const b = mac.split(':').map((h) => parseInt(h, 16));
  b[0] ^= 0x02;
  const groups = [(b[0] << 8) | b[1], (b[2] << 8) | 0xff, (0xfe << 8) | b[3], (b[4] << 8) | b[5]];
  return `fe80::${groups.map((g) => g.toString(16)).join(':')}`;
}
