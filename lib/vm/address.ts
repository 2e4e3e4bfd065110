import type { ProxmoxNode } from '../proxmox';
import { guestIpv4Of, nicMacOf } from '../proxmox/guestAgent';
import type { VmConfig } from '../proxmox/vmConfig';
import { vmIp } from '../network';

/**
 * Where a VM answers: the one place that says it for a VM that exists. ipconfig0's static
 * address when it has one; for `ip=dhcp`, what the guest agent reports on net0's NIC; the
 * formula (`<GATEWAY's /24>.<vmid>`) for anything else, as every VM before DHCP had.
 */

/** ipconfig0's IPv4 setting: a static address (a pool's lease, or the formula's), `dhcp`, or none. */
export function ipconfigAddress(conf: VmConfig): { static: string } | 'dhcp' | undefined {
  const ipconfig = String(conf.entries.ipconfig0 ?? '');
  if (ipconfig.split(',').includes('ip=dhcp')) return 'dhcp';
  const address = staticAddressOf(ipconfig);
  return address ? { static: address } : undefined;
}

/** The address of an `ipconfig<n>` value with a static IPv4 (`ip=192.0.2.10/24,gw=…`); none for dhcp or none. */
export function staticAddressOf(ipconfig: string | undefined): string | undefined {
  const ip = ipconfig
    ?.split(',')
    .map((part) => part.split('='))
    .find(([key]) => key === 'ip')?.[1];
  const m = ip === undefined ? null : /^(\d{1,3}(?:\.\d{1,3}){3})\/\d{1,2}$/.exec(ip);
  return m ? m[1] : undefined;
}

/** One question to the guest agent: net0's IPv4 address, or why there is none (yet). */
export async function agentAddress(node: ProxmoxNode, vmid: number, conf: VmConfig): Promise<{ ip: string } | { reason: string }> {
  const mac = nicMacOf(conf.entries.net0);
  if (!mac) return { reason: `VM ${vmid} has no net0 with a MAC address` };
  try {
    const ip = guestIpv4Of(await node.agentNetworkInterfaces(vmid), mac);
    return ip ? { ip } : { reason: `the guest agent reports no IPv4 address on net0 (${mac}) yet` };
  } catch (err) {
    return { reason: (err as Error).message.split('\n')[0] };
  }
}

/**
 * The address of an existing VM. Undefined for a DHCP VM whose agent does not answer (it
 * is stopped, or still booting): nothing else knows its lease.
 */
export async function vmAddress(gateway: string, node: ProxmoxNode, vmid: number, conf?: VmConfig): Promise<string | undefined> {
  const config = conf ?? (await node.config(vmid));
  const set = ipconfigAddress(config);
  if (set === 'dhcp') {
    const answer = await agentAddress(node, vmid, config);
    return 'ip' in answer ? answer.ip : undefined;
  }
  return set?.static ?? vmIp(gateway, vmid);
}
