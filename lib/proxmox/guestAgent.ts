import net from 'node:net';

/**
 * What qemu-ga's `guest-network-get-interfaces` answers (qapi/qga: GuestNetworkInterface),
 * through Proxmox: `qm guest cmd <vmid> network-get-interfaces` prints the list itself,
 * `GET .../agent/network-get-interfaces` wraps it as `{ result: [...] }`
 * (qemu-server PVE/API2/Qemu/Agent.pm). Only the fields QemuRun reads are kept.
 */
export interface GuestInterface {
  name: string;
  /** `hardware-address`: lower case from the guest's sysfs; absent on some virtual links. */
  mac?: string;
  addresses: Array<{ type: 'ipv4' | 'ipv6'; address: string; prefix: number }>;
}

/** The list of interfaces, from the command's output (a list) or the API's answer (`{ result }`). */
export function guestInterfacesOf(data: unknown): GuestInterface[] {
  const list = data && typeof data === 'object' && !Array.isArray(data) && 'result' in data ? (data as { result: unknown }).result : data;
  if (!Array.isArray(list)) throw new Error('network-get-interfaces: the guest agent did not answer with a list of interfaces');
  return list.map((raw, i): GuestInterface => {
    if (!raw || typeof raw !== 'object') throw new Error(`network-get-interfaces: interface ${i} is not an object`);
    const nic = raw as Record<string, unknown>;
    if (typeof nic.name !== 'string') throw new Error(`network-get-interfaces: interface ${i} has no name`);
    const ips = Array.isArray(nic['ip-addresses']) ? (nic['ip-addresses'] as unknown[]) : [];
    return {
      name: nic.name,
      ...(typeof nic['hardware-address'] === 'string' ? { mac: nic['hardware-address'].toLowerCase() } : {}),
      addresses: ips.flatMap((a) => {
        const ip = (a ?? {}) as Record<string, unknown>;
        const type = ip['ip-address-type'];
        const address = ip['ip-address'];
        if ((type !== 'ipv4' && type !== 'ipv6') || typeof address !== 'string') return [];
        return [{ type, address, prefix: typeof ip.prefix === 'number' ? ip.prefix : type === 'ipv4' ? 32 : 128 }];
      }),
    };
  });
}

/** `qm guest cmd`'s output: the agent's answer as JSON (to_json, pretty). */
export function parseGuestInterfaces(stdout: string): GuestInterface[] {
  let data: unknown;
  try {
    data = JSON.parse(stdout);
  } catch {
    throw new Error(`network-get-interfaces: not JSON: '${stdout.trim().slice(0, 60)}'`);
  }
  return guestInterfacesOf(data);
}

/**
 * The IPv4 address the guest holds on the NIC with `mac` (net0's, from the VM's config, so
 * never `lo`), not link-local (169.254/16, what a guest gives itself without a lease).
 * Undefined while there is none, e.g. before the DHCP lease.
 */
export function guestIpv4Of(interfaces: readonly GuestInterface[], mac: string): string | undefined {
  const nic = interfaces.find((n) => n.mac === mac.toLowerCase());
  return nic?.addresses.find((a) => a.type === 'ipv4' && net.isIPv4(a.address) && !a.address.startsWith('169.254.'))?.address;
}

/**
 * The MAC address of a `netN` value as Proxmox stores it (`virtio=BC:24:11:…,bridge=…`,
 * qemu-server's net format: the model key carries the MAC, or `macaddr=`).
 */
export function nicMacOf(value: string | number | undefined): string | undefined {
  for (const part of String(value ?? '').split(',')) {
    const [k, v] = part.split('=');
    if (v && /^(virtio|e1000|e1000e|rtl8139|vmxnet3|macaddr)$/.test(k) && /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(v)) return v.toLowerCase();
  }
  return undefined;
}
