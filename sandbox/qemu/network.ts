import fs from 'node:fs';
import net from 'node:net';
import { netMac, parseResolvConf, type Resolv } from '../state/cloudinit';
import { dhcpLease, wantsDhcp } from '../state/dhcp';
import type { VmConf } from '../state/vmconf';

/**
 * The network of a real guest, and the one translation the sandbox makes.
 *
 * A Proxmox VM sits on a bridge and owns the address its `ipconfig0` gives it. The
 * sandbox's VM addresses are loopback ones (`127.0.0.<vmid>`, so that tests never send a
 * packet off the machine), and no guest kernel can use a 127/8 address on a NIC. So each
 * guest gets QEMU's user network (slirp) in restricted mode, which routes nothing off the
 * machine, and:
 *   - the address QemuRun uses, `<ipconfig0 address>:<VM_SSH_PORT>`, is forwarded to the
 *     guest's port 22 (`hostfwd`): `ssh user@127.0.0.<vmid>` from the host reaches the guest;
 *   - cloud-init's network-config carries qemu-server's text with a loopback address
 *     replaced by slirp's (GUEST_ADDRESS, its gateway and DNS): the one line that differs
 *     from what Proxmox would write;
 *   - with ipconfig0 `ip=dhcp` the guest takes slirp's lease (GUEST_ADDRESS) and the forward
 *     comes from the sandbox DHCP stand-in's lease for net0's MAC (../state/dhcp.ts); the
 *     guest agent's `network-get-interfaces` runs the translation the other way, reporting
 *     that loopback address in place of GUEST_ADDRESS (agentAddressesAsForwarded);
 *   - the one way out is ARCHIVE_ADDRESS:80 (`guestfwd`), the sandbox's proxy to Debian's
 *     package archive (./archiveProxy.ts), so the init script's apt-get works and no other
 *     traffic leaves the machine.
 */
const GUEST_ADDRESS = '10.0.2.15';
const GUEST_GATEWAY = '10.0.2.2';
const GUEST_DNS = '10.0.2.3';
const ARCHIVE_ADDRESS = '10.0.2.100';
/** What QEMURUN_MIRROR is in sandbox mode with real guests. */
export const GUEST_ARCHIVE_URL = `http://${ARCHIVE_ADDRESS}`;

/** The node's /etc/resolv.conf, which qemu-server's get_dns_conf falls back to. */
export function nodeResolv(file = '/etc/resolv.conf'): Resolv {
  try {
    return parseResolvConf(fs.readFileSync(file, 'utf8'));
  } catch {
    return { nameservers: [] };
  }
}

/** In 127.0.0.0/8 (written as IPv4, or IPv4-mapped IPv6). */
const isLoopbackV4 = (ip: string) => {
  const v4 = ip.toLowerCase().startsWith('::ffff:') ? ip.slice(7) : ip;
  return net.isIPv4(v4) && v4.startsWith('127.');
};
const isLoopback = (cidr: string) => isLoopbackV4(cidr.split('/')[0]);

/** The ipconfig a real guest gets: a loopback address becomes slirp's. */
export function guestIpconfig(_id: string, cfg: Record<string, string>): Record<string, string> {
  if (!cfg.ip || cfg.ip === 'dhcp' || !isLoopback(cfg.ip)) return cfg;
  return { ...cfg, ip: `${GUEST_ADDRESS}/24`, gw: GUEST_GATEWAY };
}

/** With the guest on slirp, its resolver is slirp's (the node's would be unreachable). */
export const GUEST_RESOLV: Resolv = { nameservers: [GUEST_DNS] };

/**
 * The loopback address a VM's SSH answers on (a process guest's sshd, a QEMU guest's
 * forward): ipconfig0's static address, as cloud-init gives it to a real guest, else, for
 * configs without one, the gateway's /24 plus the VMID. Never a non-loopback one.
 */
export function forwardAddress(gateway: string, vmid: number, ipconfig0?: string): string | undefined {
  const fixed = /(?:^|,)ip=(\d{1,3}(?:\.\d{1,3}){3})\/\d{1,2}(?:,|$)/.exec(ipconfig0 ?? '')?.[1];
  if (fixed !== undefined) return isLoopbackV4(fixed) ? fixed : undefined;
  const octets = gateway.split('.');
  if (octets.length !== 4 || octets[0] !== '127' || vmid > 255) return undefined;
  return [...octets.slice(0, 3), String(vmid)].join('.');
}

/**
 * Where a real guest's SSH is forwarded from: for ipconfig0 `ip=dhcp`, the loopback address
 * the sandbox's DHCP stand-in leases to net0's MAC (../state/dhcp.ts), else ipconfig0's
 * static address (a pool's lease), else the gateway's /24 plus the VMID. The guest itself takes slirp's lease (GUEST_ADDRESS) either way.
 */
export function sshForwardAddress(dir: string, conf: VmConf, gateway: string, vmid: number): string | undefined {
  if (!wantsDhcp(conf)) return forwardAddress(gateway, vmid, conf.props.ipconfig0);
  const mac = netMac(conf.props.net0 ?? '');
  return mac ? dhcpLease(dir, mac, gateway) : undefined;
}

/**
 * The one translation, run the other way for what the guest agent reports: the guest holds
 * slirp's GUEST_ADDRESS on its NIC, which means nothing outside QEMU, so the agent's
 * answer carries the loopback address forwarded to it in its place (the address the
 * guest's NIC would hold on a Proxmox bridge). Nothing else in the answer changes.
 */
export function agentAddressesAsForwarded(interfaces: unknown[], host: string | undefined): unknown[] {
  if (!host) return interfaces;
  return interfaces.map((nic) => {
    const n = nic as Record<string, unknown>;
    if (!Array.isArray(n['ip-addresses'])) return nic;
    return { ...n, 'ip-addresses': (n['ip-addresses'] as Array<Record<string, unknown>>).map((a) => (a['ip-address'] === GUEST_ADDRESS ? { ...a, 'ip-address': host } : a)) };
  });
}

/** `-netdev` for netN: restricted slirp, the SSH forward and the archive's one way out. */
export function userNetdev(id: string, opts: { sshFrom?: { host: string; port: number }; archiveSocket: string }): string {
  const parts = [`user`, `id=${id}`, 'restrict=on', `net=10.0.2.0/24`];
  if (opts.sshFrom) parts.push(`hostfwd=tcp:${opts.sshFrom.host}:${opts.sshFrom.port}-:22`);
  // One socat per connection (a chardev would carry a single connection for the VM's life).
  parts.push(`guestfwd=tcp:${ARCHIVE_ADDRESS}:80-cmd:socat STDIO UNIX-CONNECT:${opts.archiveSocket}`);
  return parts.join(',');
}
