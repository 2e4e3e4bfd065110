import { createHash } from 'node:crypto';
import net from 'node:net';
import type { VmConf } from './vmconf';
import { uriUnescape } from './escape';

/**
 * What qemu-server puts on a NoCloud cloud-init drive, line for line as
 * `PVE::QemuServer::Cloudinit` writes it (qemu-server src/PVE/QemuServer/Cloudinit.pm):
 * `cloudinit_userdata`, `nocloud_network` (version 1), `nocloud_gen_metadata`. `qm
 * cloudinit dump` prints these; real guests (sandbox/qemu/) boot with them.
 */

/** `get_hostname_fqdn`: the name up to the first dot; the fqdn from the name or searchdomain. */
function hostnameFqdn(conf: VmConf, vmid: number): { hostname: string; fqdn: string } {
  const name = conf.props.name ?? `VM${vmid}`;
  if (name.includes('.')) return { hostname: name.replace(/\..*$/, ''), fqdn: name };
  const search = conf.props.searchdomain;
  return { hostname: name, fqdn: search ? `${name}.${search}` : name };
}

/** `cloudinit_userdata`. */
export function cloudinitUserdata(conf: VmConf, vmid: number): string {
  const p = conf.props;
  const { hostname, fqdn } = hostnameFqdn(conf, vmid);
  let out = `#cloud-config\nhostname: ${hostname}\nmanage_etc_hosts: true\nfqdn: ${fqdn}\n`;
  if (p.ciuser !== undefined) out += `user: ${p.ciuser}\n`;
  if (p.ciuser === 'root') out += 'disable_root: False\n';
  if (p.cipassword !== undefined) out += `password: ${p.cipassword}\n`;
  if (p.sshkeys !== undefined) {
    out += 'ssh_authorized_keys:\n';
    for (const k of uriUnescape(p.sshkeys).split('\n').filter((l) => /\S/.test(l))) out += `  - ${k}\n`;
  }
  out += 'chpasswd:\n  expire: False\n';
  if (p.ciuser !== 'root') out += 'users:\n  - default\n';
  if (p.ciupgrade === undefined || p.ciupgrade === '1') out += 'package_upgrade: true\n';
  return out;
}

/** The node's resolver settings, as PVE::INotify reads /etc/resolv.conf (`resolvconf`). */
export interface Resolv {
  search?: string;
  nameservers: string[];
}

/**
 * `PVE::INotify::read_etc_resolv_conf`: a `search` or `domain` line at the start of a line
 * gives its first word only (the last such line wins); up to three `nameserver` lines with
 * an IP address count, anything else there is skipped.
 */
export function parseResolvConf(text: string): Resolv {
  const out: Resolv = { nameservers: [] };
  for (const line of text.split('\n')) {
    const search = /^(?:search|domain)\s+(\S+)/.exec(line);
    if (search) {
      out.search = search[1];
      continue;
    }
    const ns = /^\s*nameserver\s+(\S+)/.exec(line);
    const address = ns?.[1].split('%')[0];
    if (address && out.nameservers.length < 3 && net.isIP(address)) out.nameservers.push(address);
  }
  return out;
}

/**
 * `PVE::QemuServer::Network::parse_ipconfig`. Proxmox accepts these combinations at `qm
 * set` and only warns when it writes the drive, where the interface then gets no subnets:
 * a gateway with DHCP or without an address. Neither address set means DHCP for both.
 */
export function parseIpconfig(value: string): Record<string, string> | undefined {
  const cfg: Record<string, string> = Object.fromEntries(
    value
      .split(',')
      .map((kv) => kv.split('='))
      .filter((kv) => kv.length === 2)
      .map(([k, v]) => [k, v]),
  );
  if (cfg.gw && !cfg.ip) return undefined;
  if (cfg.gw6 && !cfg.ip6) return undefined;
  if (cfg.gw && cfg.ip === 'dhcp') return undefined;
  if (cfg.gw6 && !net.isIPv6(cfg.ip6.split('/')[0])) return undefined;
  if (!cfg.ip && !cfg.ip6) return { ip: 'dhcp', ip6: 'dhcp' };
  return cfg;
}

/** The MAC address of `netN` (`virtio=BC:24:11:…,bridge=…`, or `macaddr=`). */
export function netMac(value: string): string | undefined {
  for (const part of value.split(',')) {
    const [k, v] = part.split('=');
    if (v && /^(virtio|e1000|e1000e|rtl8139|vmxnet3|macaddr)$/.test(k) && /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(v)) return v;
  }
  return undefined;
}

/** `$PVE::Network::ipv4_reverse_mask`: prefix length to dotted netmask. */
function netmask(prefix: number): string {
  const bits = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return [24, 16, 8, 0].map((s) => (bits >>> s) & 0xff).join('.');
}

class CloudinitError extends Error {}

/**
 * `nocloud_network`. `ipconfig` may rewrite an interface's settings before they are
 * written (real guests use it for the one translation the sandbox makes, see
 * sandbox/qemu/network.ts); `resolv` stands for the node's /etc/resolv.conf.
 */
export function nocloudNetwork(conf: VmConf, resolv: Resolv, ipconfig: (id: string, cfg: Record<string, string>) => Record<string, string> = (_, c) => c): string {
  let out = 'version: 1\nconfig:\n';
  // Perl's `sort keys`: string order (net10 before net2).
  const ifaces = Object.keys(conf.props)
    .filter((k) => /^net\d+$/.test(k))
    .sort();
  for (const iface of ifaces) {
    const id = iface.slice(3);
    const raw = conf.props[`ipconfig${id}`];
    if (!raw) continue;
    const parsed = parseIpconfig(raw);
    const cfg = parsed ? ipconfig(id, parsed) : {};
    const mac = netMac(conf.props[iface])?.toLowerCase();
    if (!mac) throw new CloudinitError(`network interface '${iface}' has no mac address`);
    out += `    - type: physical\n      name: eth${id}\n      mac_address: '${mac}'\n      subnets:\n`;
    const i = '        ';
    if (cfg.ip !== undefined) {
      if (cfg.ip === 'dhcp') out += `${i}- type: dhcp4\n`;
      else {
        const [addr, mask] = cfg.ip.split('/');
        if (mask === undefined) throw new CloudinitError(`not a CIDR: ${cfg.ip}`);
        out += `${i}- type: static\n${i}  address: '${addr}'\n${i}  netmask: '${netmask(Number(mask))}'\n`;
        if (cfg.gw !== undefined) out += `${i}  gateway: '${cfg.gw}'\n`;
      }
    }
    if (cfg.ip6 !== undefined) {
      if (cfg.ip6 === 'dhcp') out += `${i}- type: dhcp6\n`;
      else if (cfg.ip6 === 'auto') out += `${i}- type: ipv6_slaac\n`;
      else {
        out += `${i}- type: static6\n${i}  address: '${cfg.ip6}'\n`;
        if (cfg.gw6 !== undefined) out += `${i}  gateway: '${cfg.gw6}'\n`;
      }
    }
  }
  // get_dns_conf: the VM's own settings, else the node's resolv.conf. Both come back as
  // array references, which Perl counts as true, so the entry is always written.
  const search = (conf.props.searchdomain ?? resolv.search ?? '').split(/\s+/).filter(Boolean);
  const nameservers = conf.props.nameserver !== undefined ? conf.props.nameserver.split(/\s+/).filter(Boolean) : resolv.nameservers;
  out += '    - type: nameserver\n';
  if (nameservers.length) out += '      address:\n' + nameservers.map((n) => `      - '${n}'\n`).join('');
  if (search.length) out += '      search:\n' + search.map((s) => `      - '${s}'\n`).join('');
  return out;
}

/** `nocloud_gen_metadata`: the instance id changes whenever user-data or network-config does. */
export function nocloudMetadata(userData: string, networkConfig: string): string {
  return `instance-id: ${createHash('sha1').update(userData + networkConfig).digest('hex')}\n`;
}

/** The `cicustom` snippets' texts, as `get_custom_cloudinit_files` reads them (sandbox/cli/qm/cicustom.ts). */
export type CustomCloudinitFiles = Partial<Record<'meta' | 'network' | 'user' | 'vendor', string>>;

/** `generate_nocloud`'s four files: a `cicustom` snippet replaces the file qemu-server would generate. */
export function nocloudFiles(
  conf: VmConf,
  vmid: number,
  resolv: Resolv,
  ipconfig?: Parameters<typeof nocloudNetwork>[2],
  custom: CustomCloudinitFiles = {},
): Record<string, string> {
  const user = custom.user ?? cloudinitUserdata(conf, vmid);
  const network = custom.network ?? nocloudNetwork(conf, resolv, ipconfig);
  const meta = custom.meta ?? nocloudMetadata(user, network);
  const files = { 'user-data': user, 'network-config': network, 'meta-data': meta, 'vendor-data': custom.vendor ?? '' };
  const sum = Object.values(files).reduce((n, t) => n + Buffer.byteLength(t), 0);
  if (sum > 3 * 1024 * 1024) throw new CloudinitError('Cloud-Init sum of snippets too big (> 3 MiB)');
  return files;
}
