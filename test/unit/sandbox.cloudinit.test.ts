import { createHash } from 'node:crypto';
import { parseConf } from '../../sandbox/state/vmconf';
import { cloudinitUserdata, nocloudFiles, nocloudNetwork, parseResolvConf } from '../../sandbox/state/cloudinit';
import { GUEST_RESOLV, guestIpconfig } from '../../sandbox/qemu/network';
import { SANDBOX_GUEST_ARCHIVE_URL } from '../../lib/config';
import { GUEST_ARCHIVE_URL } from '../../sandbox/qemu/network';
import { qemuCommand } from '../../sandbox/qemu/command';
import { cicustom } from '../../sandbox/cli/formats';
import { readSnippetUserData } from '../../sandbox/vm/userData';

/**
 * The NoCloud files qemu-server writes (PVE::QemuServer::Cloudinit: cloudinit_userdata,
 * nocloud_network, nocloud_gen_metadata), for the config QemuRun gives a VM, and the one
 * translation real sandbox guests get.
 */
const CONF = parseConf(`agent: 1
boot: order=scsi0
ciupgrade: 0
ciuser: alice
cores: 2
ide2: local-lvm:vm-120-cloudinit,media=cdrom
ipconfig0: ip=127.0.0.120/24,gw=127.0.0.1
memory: 2048
name: web-120
net0: virtio=BC:24:11:AA:0B:1C,bridge=vmbr0
scsi0: local-lvm:vm-120-disk-0,size=16G
scsihw: virtio-scsi-pci
serial0: socket
sshkeys: ssh-ed25519%20AAAAC3Nza%20main%0Assh-ed25519%20AAAAC3Nzb%20user%0A
`);

const RESOLV = parseResolvConf('# comment\nsearch example.org lab.example.org\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n');

test('user-data as cloudinit_userdata writes it: user renames the default account, keys one per line', () => {
  expect(cloudinitUserdata(CONF, 120)).toBe(
    '#cloud-config\nhostname: web-120\nmanage_etc_hosts: true\nfqdn: web-120\nuser: alice\n' +
      'ssh_authorized_keys:\n  - ssh-ed25519 AAAAC3Nza main\n  - ssh-ed25519 AAAAC3Nzb user\n' +
      'chpasswd:\n  expire: False\nusers:\n  - default\n',
  );
});

test('network-config as nocloud_network writes it: lower-case MAC, dotted netmask, the node resolver', () => {
  expect(nocloudNetwork(CONF, RESOLV)).toBe(
    'version: 1\nconfig:\n' +
      "    - type: physical\n      name: eth0\n      mac_address: 'bc:24:11:aa:0b:1c'\n      subnets:\n" +
      "        - type: static\n          address: '127.0.0.120'\n          netmask: '255.255.255.0'\n          gateway: '127.0.0.1'\n" +
      "    - type: nameserver\n      address:\n      - '192.0.2.53'\n      - '192.0.2.54'\n      search:\n      - 'example.org'\n",
  );
  const dhcp = parseConf('net0: virtio=BC:24:11:AA:0B:1C,bridge=vmbr0\nipconfig0: ip=dhcp\n');
  expect(nocloudNetwork(dhcp, { nameservers: [] })).toBe(
    "version: 1\nconfig:\n    - type: physical\n      name: eth0\n      mac_address: 'bc:24:11:aa:0b:1c'\n      subnets:\n        - type: dhcp4\n    - type: nameserver\n",
  );
});

test('the node resolver as read_etc_resolv_conf reads it: the first search word, the last search line, three IP nameservers', () => {
  expect(parseResolvConf('search a.example b.example\ndomain c.example d.example\n')).toEqual({ search: 'c.example', nameservers: [] });
  // Indented search lines do not count; indented nameserver lines do; names are no nameservers.
  expect(parseResolvConf('  search indented.example\n  nameserver 192.0.2.1\nnameserver dns.example\nnameserver 2001:db8::53\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n')).toEqual({
    nameservers: ['192.0.2.1', '2001:db8::53', '192.0.2.2'],
  });
});

test('ipconfig as parse_ipconfig reads it: a gateway with DHCP or without an address leaves the interface without subnets', () => {
  const head = "version: 1\nconfig:\n    - type: physical\n      name: eth0\n      mac_address: 'bc:24:11:aa:0b:1c'\n      subnets:\n";
  const net = (ipconfig: string) => nocloudNetwork(parseConf(`net0: virtio=BC:24:11:AA:0B:1C,bridge=vmbr0\nipconfig0: ${ipconfig}\n`), { nameservers: [] });
  expect(net('ip=dhcp,gw=192.0.2.1')).toBe(`${head}    - type: nameserver\n`);
  expect(net('gw=192.0.2.1')).toBe(`${head}    - type: nameserver\n`);
  expect(net('ip6=auto,gw6=2001:db8::1')).toBe(`${head}    - type: nameserver\n`);
  // Neither address: DHCP for both families.
  expect(net('ip6=')).toBe(`${head}        - type: dhcp4\n        - type: dhcp6\n    - type: nameserver\n`);
  expect(net('ip=192.0.2.7/24,ip6=2001:db8::7/64,gw6=2001:db8::1')).toContain("- type: static6\n          address: '2001:db8::7/64'\n          gateway: '2001:db8::1'\n");
});

test('the instance id is the SHA-1 of user-data and network-config, so changing either makes a new instance', () => {
  const files = nocloudFiles(CONF, 120, RESOLV);
  const sha = createHash('sha1').update(files['user-data'] + files['network-config']).digest('hex');
  expect(files['meta-data']).toBe(`instance-id: ${sha}\n`);
  expect(files['vendor-data']).toBe('');
  expect(nocloudFiles(parseConf(`${'name: other\n'}${Object.entries(CONF.props).filter(([k]) => k !== 'name').map(([k, v]) => `${k}: ${v}`).join('\n')}\n`), 120, RESOLV)['meta-data']).not.toBe(files['meta-data']);
});

test('a cicustom snippet replaces the file qemu-server would generate, and the instance id follows it', () => {
  const user = '#cloud-config\nuser: alice\nruncmd: [true]\n';
  const files = nocloudFiles(CONF, 120, RESOLV, undefined, { user });
  expect(files['user-data']).toBe(user);
  expect(files['network-config']).toBe(nocloudNetwork(CONF, RESOLV));
  expect(files['meta-data']).toBe(`instance-id: ${createHash('sha1').update(user + files['network-config']).digest('hex')}\n`);
  expect(nocloudFiles(CONF, 120, RESOLV, undefined, { meta: 'instance-id: mine\n', vendor: 'v' })).toMatchObject({ 'meta-data': 'instance-id: mine\n', 'vendor-data': 'v' });
});

test("cicustom is checked as qemu-server's pve-qm-cicustom: known keys, each a volume id", () => {
  expect(cicustom('user=local:snippets/u.yaml,network=local:snippets/n.yaml')).toBeUndefined();
  expect(cicustom('local:snippets/u.yaml')).toBe('value without key, but schema does not define a default key');
  expect(cicustom('users=local:snippets/u.yaml')).toBe('invalid key in comma-separated list property: users');
  expect(cicustom('user=a,user=b')).toBe('duplicate key in comma-separated list property: user');
  expect(cicustom('user=u.yaml')).toEqual({ user: "invalid format - unable to parse volume ID 'u.yaml'" });
});

test("process guests read a user snippet's account, keys, write_files and runcmd; anything else is left out", () => {
  const got = readSnippetUserData(
    '#cloud-config\nuser: bob\npassword: $5$x$y\nssh_authorized_keys: [k1, 2]\nwrite_files:\n  - {path: /a, content: aGk=, encoding: b64, permissions: "0600"}\n  - {content: x}\nruncmd: [echo hi, [touch, /b], 3]\npackages: [curl, [hello, "2.10-3"]]\n',
  );
  expect(got).toEqual({
    user: 'bob',
    passwordHash: '$5$x$y',
    hostname: undefined,
    keys: ['k1'],
    writeFiles: [{ path: '/a', content: 'hi', permissions: '0600', append: false }],
    runcmd: ['echo hi', ['touch', '/b']],
    packages: ['curl', 'hello=2.10-3'],
  });
  expect(readSnippetUserData('#cloud-config\n- a\n')).toBeUndefined();
});

test("real guests: a loopback address becomes the user network's, and everything else stays qemu-server's", () => {
  const real = nocloudNetwork(CONF, GUEST_RESOLV, guestIpconfig);
  expect(real).toContain("address: '10.0.2.15'\n          netmask: '255.255.255.0'\n          gateway: '10.0.2.2'");
  expect(real).toContain("- type: nameserver\n      address:\n      - '10.0.2.3'\n");
  const routed = parseConf('net0: virtio=BC:24:11:AA:0B:1C,bridge=vmbr0\nipconfig0: ip=198.51.100.7/24,gw=198.51.100.1\n');
  expect(nocloudNetwork(routed, GUEST_RESOLV, guestIpconfig)).toContain("address: '198.51.100.7'");
  // One address for the archive proxy, whichever side names it.
  expect(GUEST_ARCHIVE_URL).toBe(SANDBOX_GUEST_ARCHIVE_URL);
});

test("the QEMU command uses qemu-server's device names, forwards the VM's address to port 22, and restricts the network", () => {
  const args = qemuCommand({
    vmid: 120,
    conf: CONF,
    disks: [
      { key: 'scsi0', file: '/d/vm-120-disk-0', format: 'raw', cdrom: false },
      { key: 'ide2', file: '/d/vm-120-cloudinit', format: 'raw', cdrom: true },
      { key: 'scsi1', file: '/d/vm-120-disk-1', format: 'raw', cdrom: false },
    ],
    accel: 'tcg',
    qmpSocket: '/r/120.qmp',
    qgaSocket: '/r/120.qga',
    serialSocket: '/r/120.serial0',
    serialLog: '/g/serial.log',
    archiveSocket: '/r/archive.sock',
    sshFrom: { host: '127.0.0.120', port: 22 },
  });
  const line = args.join(' ');
  expect(line).toContain('-device virtio-scsi-pci,id=scsihw0');
  expect(line).toContain('-device scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=0,drive=drive-scsi0,id=scsi0,bootindex=100');
  expect(line).toContain('-device ide-cd,bus=ide.1,unit=0,drive=drive-ide2,id=ide2');
  // An extra data disk (issue 24) is the guest's next SCSI disk, not a boot device.
  expect(line).toContain('-device scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1 ');
  expect(line).toContain('-device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0');
  expect(line).toContain('-device virtio-net-pci,mac=BC:24:11:AA:0B:1C,netdev=net0,id=net0');
  expect(line).toContain('-netdev user,id=net0,restrict=on,net=10.0.2.0/24,hostfwd=tcp:127.0.0.120:22-:22,guestfwd=tcp:10.0.2.100:80-cmd:socat STDIO UNIX-CONNECT:/r/archive.sock');
  expect(line).toMatch(/-accel tcg,thread=multi -cpu max -smp 2,sockets=1,cores=2,maxcpus=2 -m 2048/);
});
