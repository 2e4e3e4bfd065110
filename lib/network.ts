/** VMID = last IP octet: VM 120 with gateway 192.168.0.1 is 192.168.0.120. */
export function vmIp(gateway: string, vmid: number): string {
  return `${gateway.split('.').slice(0, 3).join('.')}.${vmid}`;
}
