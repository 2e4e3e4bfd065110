import net from 'node:net';

/** VMID = last IP octet: VM 120 with gateway 192.168.0.1 is 192.168.0.120. */
export function vmIp(gateway: string, vmid: number): string {
  return `${gateway.split('.').slice(0, 3).join('.')}.${vmid}`;
}

/**
 * A port nothing listens on now on `host`, as the kernel picks one (listen on 0), for
 * whoever binds it next: a dev server, a test's service, the benchmark. Free when asked,
 * not reserved: another process may take it before the caller binds it.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether something accepts a TCP connection at `ip:port` within half a second. */
export function portAnswers(ip: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: ip, port, timeout: 500 });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

/**
 * Membership in `entries` (addresses or `address/bits` subnets, IPv4 or IPv6), on
 * net.BlockList: an IPv4 entry also holds its IPv6 form (`::ffff:10.0.0.5`). Anything
 * that is not an address is in no list; an entry that is not one throws.
 */
export function addressMatcher(entries: readonly string[]): (ip: string) => boolean {
  const list = new net.BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/');
    const type = net.isIPv6(address) ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return (ip) => {
    const family = net.isIP(ip);
    return family !== 0 && list.check(ip, family === 6 ? 'ipv6' : 'ipv4');
  };
}
