import { guestInterfacesOf, guestIpv4Of, nicMacOf, parseGuestInterfaces } from '../../lib/proxmox/guestAgent';
import { qmGuestCmd } from '../../lib/proxmox/commands';

/**
 * `network-get-interfaces` as qemu-ga answers it through Proxmox (`qm guest cmd` prints the
 * list, pretty and key-sorted; the API wraps it in `{ result }`), and the address QemuRun
 * takes from it: net0's NIC, IPv4, neither loopback nor link-local.
 */

const MAC = 'BC:24:11:5E:7A:01';

/** A Debian 12 guest's answer, as `qm guest cmd 120 network-get-interfaces` prints it. */
const debian = `[
   {
      "hardware-address" : "00:00:00:00:00:00",
      "ip-addresses" : [
         {
            "ip-address" : "127.0.0.1",
            "ip-address-type" : "ipv4",
            "prefix" : 8
         },
         {
            "ip-address" : "::1",
            "ip-address-type" : "ipv6",
            "prefix" : 128
         }
      ],
      "name" : "lo",
      "statistics" : {
         "rx-bytes" : 1234,
         "rx-dropped" : 0,
         "rx-errs" : 0,
         "rx-packets" : 16,
         "tx-bytes" : 1234,
         "tx-dropped" : 0,
         "tx-errs" : 0,
         "tx-packets" : 16
      }
   },
   {
      "hardware-address" : "bc:24:11:5e:7a:01",
      "ip-addresses" : [
         {
            "ip-address" : "192.0.2.57",
            "ip-address-type" : "ipv4",
            "prefix" : 24
         },
         {
            "ip-address" : "fe80::be24:11ff:fe5e:7a01",
            "ip-address-type" : "ipv6",
            "prefix" : 64
         }
      ],
      "name" : "eth0",
      "statistics" : {
         "rx-bytes" : 98765,
         "rx-dropped" : 0,
         "rx-errs" : 0,
         "rx-packets" : 321,
         "tx-bytes" : 4321,
         "tx-dropped" : 0,
         "tx-errs" : 0,
         "tx-packets" : 45
      }
   }
]
`;

test("qm guest cmd's output: net0's IPv4 address, the MAC compared without case", () => {
  const nics = parseGuestInterfaces(debian);
  expect(nics.map((n) => n.name)).toEqual(['lo', 'eth0']);
  expect(guestIpv4Of(nics, MAC)).toBe('192.0.2.57');
});

test("the API's answer: the same list inside { result }", () => {
  expect(guestIpv4Of(guestInterfacesOf({ result: JSON.parse(debian) }), MAC)).toBe('192.0.2.57');
});

test('several NICs: only the one with net0\'s MAC counts, whatever its place', () => {
  const nics = guestInterfacesOf([
    { name: 'lo', 'hardware-address': '00:00:00:00:00:00', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '127.0.0.1', prefix: 8 }] },
    { name: 'docker0', 'hardware-address': '02:42:ac:11:00:01', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '172.17.0.1', prefix: 16 }] },
    { name: 'eth1', 'hardware-address': 'bc:24:11:00:00:02', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '198.51.100.9', prefix: 24 }] },
    { name: 'ens18', 'hardware-address': 'bc:24:11:5e:7a:01', 'ip-addresses': [{ 'ip-address-type': 'ipv4', 'ip-address': '192.0.2.58', prefix: 24 }] },
  ]);
  expect(guestIpv4Of(nics, MAC)).toBe('192.0.2.58');
  expect(guestIpv4Of(nics, 'BC:24:11:FF:FF:FF')).toBeUndefined();
});

test('no lease yet: an IPv6 link-local address only, or a self-assigned 169.254 one, or no addresses at all', () => {
  const only = (addresses: unknown[]) => guestInterfacesOf([{ name: 'eth0', 'hardware-address': 'bc:24:11:5e:7a:01', 'ip-addresses': addresses }]);
  expect(guestIpv4Of(only([{ 'ip-address-type': 'ipv6', 'ip-address': 'fe80::be24:11ff:fe5e:7a01', prefix: 64 }]), MAC)).toBeUndefined();
  expect(guestIpv4Of(only([{ 'ip-address-type': 'ipv4', 'ip-address': '169.254.10.3', prefix: 16 }]), MAC)).toBeUndefined();
  expect(guestIpv4Of(guestInterfacesOf([{ name: 'eth0', 'hardware-address': 'bc:24:11:5e:7a:01' }]), MAC)).toBeUndefined();
});

test('IPv6 only: a global IPv6 address is no IPv4 address', () => {
  const nics = guestInterfacesOf([{ name: 'eth0', 'hardware-address': 'bc:24:11:5e:7a:01', 'ip-addresses': [{ 'ip-address-type': 'ipv6', 'ip-address': '2001:db8::57', prefix: 64 }] }]);
  expect(nics[0].addresses).toEqual([{ type: 'ipv6', address: '2001:db8::57', prefix: 64 }]);
  expect(guestIpv4Of(nics, MAC)).toBeUndefined();
});

test('an answer that is no list of interfaces is an error, not an empty list', () => {
  expect(() => parseGuestInterfaces('QEMU guest agent is not running')).toThrow(/not JSON/);
  expect(() => guestInterfacesOf({ result: {} })).toThrow(/list of interfaces/);
  expect(() => guestInterfacesOf([{ 'hardware-address': MAC }])).toThrow(/interface 0 has no name/);
});

test("net0's MAC as Proxmox stores it, and the command", () => {
  expect(nicMacOf('virtio=BC:24:11:5E:7A:01,bridge=vmbr0,firewall=1')).toBe('bc:24:11:5e:7a:01');
  expect(nicMacOf('bridge=vmbr0,macaddr=BC:24:11:5E:7A:01,model=virtio')).toBe('bc:24:11:5e:7a:01');
  expect(nicMacOf('virtio,bridge=vmbr0')).toBeUndefined();
  expect(qmGuestCmd(120, 'network-get-interfaces')).toEqual(['qm', 'guest', 'cmd', '120', 'network-get-interfaces']);
});
