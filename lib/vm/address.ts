import { vmIp } from '../network';

/**
 * The IPv4 address of an existing VM: the one its ipconfig0 gives it (`ip=<addr>/<bits>`,
 * what an install from an address pool wrote), else the seed's formula, GATEWAY's /24 plus
 * the VMID, for configs without a static address.
 */
export function vmAddress(entries: Readonly<Record<string, string>> | undefined, gateway: string, vmid: number): string {
  return staticAddressOf(entries?.ipconfig0) ?? vmIp(gateway, vmid);
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
