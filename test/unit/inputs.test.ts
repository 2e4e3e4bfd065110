import crypto from 'node:crypto';
import {
  checkInput,
  cpuBody,
  diskBody,
  installSpecFromBody,
  installSpecSchema,
  InvalidInputError,
  isOpenSshPublicKey,
  memoryBody,
  type InstallSpec,
  type SizeCaps,
  workflowInputs,
} from '../../contract';
import { installAnswer } from '../support/installAnswer';
import { describeIssues } from '../../api/issues';
import { fingerprint } from '../../api/idempotency';
import { keyBlobType } from '../../lib/sshKey';

/**
 * One set of input rules (contract/inputs.ts, contract/requests.ts) for the API and the
 * worker: the API's 400s say what they said, the worker refuses what the API refuses, every
 * spec the API makes the worker accepts, and specs written before `cores` had its name
 * (`cpu`) still read.
 */

const NODES = ['pve1', 'pve2'];

/** The API's answer to an install body: its spec, or the problem of its 400. */
const apiAnswer = (body: unknown, limits: SizeCaps = {}) => installAnswer(body, { limits, nodes: NODES });

/** The worker's answer to a spec, as qmCreate and the install workflow check it: the spec, or the problem. */
function workerAnswer(spec: unknown): InstallSpec | string {
  try {
    const checked = checkInput(installSpecSchema, spec, 'qmCreate');
    checkInput(workflowInputs.install, { spec, secrets: {} }, 'installVm');
    return checked;
  } catch (err) {
    if (err instanceof InvalidInputError) return err.message;
    throw err;
  }
}

/** A key blob as OpenSSH writes one: the type as a length-prefixed string, then the key material. */
function keyLine(type: string, named = type, material = crypto.randomBytes(32)): string {
  const name = Buffer.from(named, 'latin1');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(name.length);
  return `${type} ${Buffer.concat([length, name, material]).toString('base64')}`;
}

const ED25519 = (() => {
  const x = crypto.generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!;
  return `${keyLine('ssh-ed25519', 'ssh-ed25519', Buffer.concat([Buffer.from([0, 0, 0, 32]), Buffer.from(x, 'base64url')]))} alice@laptop`;
})();
/** An ed25519 key blob announced as RSA: what a careless copy-paste or a forged key looks like. */
const WRONG_TYPE = 'ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIGZha2U=';

const base = { os: 'debian', version: '12' } as const;
const spec: InstallSpec = { os: 'debian', version: '12', vmid: 120, name: 'web', cores: 2, ramMb: 2048, diskGb: 20, user: 'debian', pubkey: ED25519 };

describe("the API's 400s", () => {
  test.each<[string, Record<string, unknown>, string]>([
    ['id above an IP octet', { id: 255 }, 'id: must be at most 254'],
    ['cpu a float', { cpu: 2.5 }, 'cpu: must be an integer'],
    ['cpu a string', { cpu: '2' }, 'cpu: must be an integer'],
    ['ram huge', { ram: 2e9 }, 'ram: must be at most 1048576'],
    ['disk in TB', { disk: '16T' }, 'disk: must be a whole number of GiB followed by G, like "32G"'],
    ['a version of another OS', { version: '24.04' }, 'version: must be one of 11, 12, 13 for debian'],
    ['os unknown', { os: 'windows' }, 'os: must be debian, ubuntu or rockylinux'],
    ['name with a dot', { name: 'web.example' }, 'name: must be a DNS label: letters, digits and inner hyphens, at most 54 characters'],
    ['node unknown', { node: 'pve9' }, "node: must be one of the cluster's nodes (pve1, pve2)"],
    ['user root', { user: 'root' }, 'user: must not be root'],
    ['pubkey empty', { pubkey: '' }, 'pubkey: must not be empty: send an OpenSSH public key, or leave the field out'],
    ['pubkey of a wrong type inside', { pubkey: WRONG_TYPE }, 'pubkey: must be one or more OpenSSH public keys, one per line'],
    ['an unknown field', { cores: 2 }, 'unknown field(s): cores'],
    ['bridge with a slash', { bridge: 'vmbr/0' }, 'bridge: must be a Proxmox bridge name like vmbr0: letters, digits, -, _ and ., at most 15 characters'],
    ['bridge longer than a Linux interface name', { bridge: 'vmbr0123456789ab' }, 'bridge: must be a Proxmox bridge name like vmbr0: letters, digits, -, _ and ., at most 15 characters'],
    ['bridge empty', { bridge: '' }, 'bridge: must be a Proxmox bridge name like vmbr0: letters, digits, -, _ and ., at most 15 characters'],
    ['bridge a number', { bridge: 0 }, 'bridge: must be a string'],
    ['vlan 0', { vlan: 0 }, 'vlan: must be at least 1'],
    ['vlan 4095', { vlan: 4095 }, 'vlan: must be at most 4094'],
    ['vlan a string', { vlan: '10' }, 'vlan: must be an integer VLAN tag from 1 to 4094'],
    ['mtu below the IP minimum', { mtu: 575 }, 'mtu: must be at least 576'],
    ['mtu 1 (the bridge\'s: leave mtu out)', { mtu: 1 }, 'mtu: must be at least 576'],
    ['mtu above Proxmox\'s', { mtu: 65521 }, 'mtu: must be at most 65520'],
    ['mtu a float', { mtu: 1500.5 }, 'mtu: must be an integer from 576 to 65520'],
    ['dns a string', { dns: '1.1.1.1' }, 'dns: must be an object like {"servers": ["192.0.2.53"], "search": "example.com"}'],
    ['dns with an unknown key', { dns: { server: ['1.1.1.1'] } }, 'unknown field(s): server'],
    ['dns.servers a string', { dns: { servers: '1.1.1.1' } }, 'dns.servers: must be a list of IPv4 or IPv6 addresses'],
    ['dns.servers empty', { dns: { servers: [] } }, 'dns.servers: must list at least 1 address'],
    ['dns.servers four', { dns: { servers: ['192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4'] } }, 'dns.servers: must list at most 3 addresses'],
    ['dns.servers a name', { dns: { servers: ['192.0.2.1', 'dns.example'] } }, 'dns.servers[1]: must be an IPv4 or IPv6 address'],
    ['dns.servers an octet too big', { dns: { servers: ['192.0.2.256'] } }, 'dns.servers[0]: must be an IPv4 or IPv6 address'],
    ['dns.servers a number', { dns: { servers: [8] } }, 'dns.servers[0]: must be an IPv4 or IPv6 address'],
    ['dns.search two domains', { dns: { search: 'a.example b.example' } }, 'dns.search: must be one domain name, like example.com'],
    ['dns.search with a newline', { dns: { search: 'example.com\nfqdn: x' } }, 'dns.search: must be one domain name, like example.com'],
  ])('install, %s', (_name, fields, problem) => {
    expect(apiAnswer({ ...base, ...fields })).toBe(problem);
  });

  test.each<[string, typeof cpuBody | typeof memoryBody | typeof diskBody, unknown, string]>([
    ['set/cpu above 32', cpuBody, { cpu: 33 }, 'cpu: must be at most 32'],
    ['set/cpu not a number', cpuBody, { cpu: 'x' }, 'cpu: must be an integer from 1 to 32'],
    ['set/memory below 512', memoryBody, { memory: 100 }, 'memory: must be at least 512 (MB)'],
    ['set/disk by nothing', diskBody, { disk: '0G' }, 'disk: must grow the disk by at least 1G'],
  ])('%s', (_name, schema, body, problem) => {
    const parsed = schema.safeParse(body);
    expect(parsed.success).toBe(false);
    expect(describeIssues(parsed.error!, body)).toBe(problem);
  });
});

describe('the worker refuses what the API refuses', () => {
  // [request field, its value, spec field, the value the spec would carry]
  test.each<[string, unknown, keyof InstallSpec, unknown]>([
    ['id', 255, 'vmid', 255],
    ['id', 99, 'vmid', 99],
    ['id', 120.5, 'vmid', 120.5],
    ['os', 'windows', 'os', 'windows'],
    ['version', '10', 'version', '10'],
    ['name', 'web.example', 'name', 'web.example'],
    ['user', 'root', 'user', 'root'],
    ['user', 'Admin', 'user', 'Admin'],
    ['cpu', 1025, 'cores', 1025],
    ['ram', 1_048_577, 'ramMb', 1_048_577],
    ['disk', '100000G', 'diskGb', 100_000],
    ['pubkey', WRONG_TYPE, 'pubkey', WRONG_TYPE],
    ['pubkey', `command="rm -rf /" ${ED25519}`, 'pubkey', `command="rm -rf /" ${ED25519}`],
    ['pubkey', keyLine('ssh-dss'), 'pubkey', keyLine('ssh-dss')],
    ['pubkey', `${ED25519}\nnot a key`, 'pubkey', `${ED25519}\nnot a key`],
    ['bridge', 'vmbr/0', 'bridge', 'vmbr/0'],
    ['vlan', 4095, 'vlan', 4095],
    ['mtu', 9001.5, 'mtu', 9001.5],
    ['mtu', 100, 'mtu', 100],
    ['dns', { servers: ['x'] }, 'dns', { servers: ['x'] }],
    ['dns', { search: 'a b' }, 'dns', { search: 'a b' }],
  ])('%s %j', (bodyField, bodyValue, specField, specValue) => {
    expect(apiAnswer({ ...base, [bodyField]: bodyValue })).toMatch(new RegExp(`^${bodyField}[.:]`));
    expect(workerAnswer({ ...spec, [specField]: specValue })).toMatch(new RegExp(`: ${specField}[.:]`));
  });

  test('and the VM operations: what set/cpu, set/memory and set/disk refuse, their workflows refuse', () => {
    for (const cpu of [0, 1, 32, 33, 2.5]) {
      expect(workflowInputs.setCpu.safeParse({ vmid: 120, cores: cpu }).success).toBe(cpuBody.safeParse({ cpu }).success);
    }
    for (const memory of [511, 512, 32_768, 32_769]) {
      expect(workflowInputs.setMemory.safeParse({ vmid: 120, memoryMb: memory }).success).toBe(memoryBody.safeParse({ memory }).success);
    }
    for (const gb of [0, 1, 4096, 4097]) {
      expect(workflowInputs.setDisk.safeParse({ vmid: 120, disk: 'scsi0', incrementGb: gb }).success).toBe(diskBody.safeParse({ disk: `${gb}G` }).success);
    }
  });
});

describe('the network fields', () => {
  test('reach the spec as given, and the worker accepts it', () => {
    const body = { ...base, bridge: 'vmbr1', vlan: 42, mtu: 9000, dns: { servers: ['192.0.2.53', '2001:db8::53'], search: 'lab.example' } };
    const made = apiAnswer(body) as InstallSpec;
    expect(made).toMatchObject({ bridge: 'vmbr1', vlan: 42, mtu: 9000, dns: { servers: ['192.0.2.53', '2001:db8::53'], search: 'lab.example' } });
    expect(workerAnswer(made)).toEqual(made);
    expect(apiAnswer({ ...base, dns: { search: 'lab.example' } })).toMatchObject({ dns: { search: 'lab.example' } });
  });

  test('a body without them (the seed\'s shape) makes the spec it made before, and `dns: {}` asks for nothing', () => {
    const seed = JSON.stringify(apiAnswer({ ...base, cpu: 2, ip: '10.0.0.5', gateway: '10.0.0.1' }));
    expect(JSON.parse(seed)).toEqual({ os: 'debian', version: '12', cores: 2, ramMb: 512, diskGb: 16, user: 'debian' });
    expect(JSON.stringify(apiAnswer({ ...base, cpu: 2, dns: {} }))).toBe(seed);
  });
});

describe('every spec the API makes, the worker accepts', () => {
  const capsCases: SizeCaps[] = [{}, { maxCpu: 4, maxRamMb: 2048, maxDiskGb: 64 }, { maxCpu: 5000, maxRamMb: 5_000_000, maxDiskGb: 500_000 }];
  const cpus = [undefined, -1024, -1, 0, 1, 2, 32, 33, 1024];
  const rams = [undefined, -1_048_576, 0, 511, 512, 4096, 1_048_576];
  const disks = [undefined, '0G', '15G', '16G', '64G', '65G', '99999G'];

  test('across the bounds of cpu, ram and disk and every kind of cap', () => {
    let checked = 0;
    for (const caps of capsCases) {
      for (const cpu of cpus) {
        for (const ram of rams) {
          for (const disk of disks) {
            const made = apiAnswer({ ...base, id: 254, cpu, ram, disk, pubkey: ` ${ED25519} \n\n${ED25519}\n` }, caps);
            expect(typeof made).toBe('object');
            expect(workerAnswer(made)).toEqual(made);
            checked++;
          }
        }
      }
    }
    expect(checked).toBe(capsCases.length * cpus.length * rams.length * disks.length);
  });

  test("with the seed's clamping: cpu ≤ 0 → 1, ram < 512 → 512, disk < 16G → 16G, caps from VM_MAX_*", () => {
    expect(installSpecFromBody({ ...base, cpu: 0, ram: 100, disk: '8G' }, {})).toMatchObject({ cores: 1, ramMb: 512, diskGb: 16, user: 'debian' });
    expect(installSpecFromBody({ ...base, cpu: -3 }, {})).toMatchObject({ cores: 1, ramMb: 512, diskGb: 16 });
    expect(installSpecFromBody({ ...base, cpu: 64, ram: 65_536, disk: '200G' }, { maxCpu: 4, maxRamMb: 8192, maxDiskGb: 100 })).toMatchObject({ cores: 4, ramMb: 8192, diskGb: 100 });
    expect(installSpecFromBody({ ...base, pubkey: ` ${ED25519}\r\n\n` }, {}).pubkey).toBe(ED25519);
  });

  test('VM_MAX_* below the floors make a 400 at the API, not an install the worker fails', () => {
    expect(apiAnswer({ ...base, disk: '32G' }, { maxDiskGb: 8 })).toMatch(/diskGb.*at least 16.*VM_MAX_DISK/);
  });
});

describe('specs written before `cores` had its name', () => {
  const { cores, ...rest } = spec;
  const legacy = { ...rest, cpu: cores };

  test('are read with `cores`, by the activities, the install and rebuild workflows', () => {
    expect(workerAnswer(legacy)).toEqual(spec);
    expect(checkInput(workflowInputs.rebuild, { vmid: 120, spec: legacy }, 'vmRebuild').spec).toEqual(spec);
  });

  test('as an install history recorded them', () => {
    // The start input of test/fixtures/histories/installVm-completed.json, as recorded.
    const recorded = { spec: { os: 'debian', version: '12', cpu: 2, ramMb: 2048, diskGb: 20, user: 'admin', name: 'web', node: 'pve2' }, secrets: {}, mainNode: 'pve1' };
    expect(checkInput(workflowInputs.install, recorded, 'installVm').spec).toEqual({ ...recorded.spec, cpu: undefined, cores: 2 });
  });

  test('a spec naming both is refused, and the old name is not a way around a bound', () => {
    expect(workerAnswer({ ...spec, cpu: 2 })).toMatch(/Unrecognized key: "cpu"/);
    expect(workerAnswer({ ...legacy, cpu: 5000 })).toMatch(/cores: cores must be at most 1024/);
  });

  test('an Idempotency-Key reused after the rename still finds the same request', () => {
    expect(fingerprint({ spec: legacy as unknown as InstallSpec, secrets: { passwd: 'x' } })).toBe(fingerprint({ spec, secrets: { passwd: 'x' } }));
    expect(fingerprint({ spec: { ...legacy, cpu: 3 } as unknown as InstallSpec, secrets: {} })).not.toBe(fingerprint({ spec, secrets: {} }));
  });
});

describe('the OpenSSH key check, without Node.js', () => {
  /** The check the API made with Buffer before the check moved into the contract. */
  const withBuffer = (line: string) => {
    const m = /^(\S+) ([A-Za-z0-9+/]+={0,2})(?: ([\x20-\x7e]{0,200}))?$/.exec(line);
    return !!m && keyBlobType(Buffer.from(m[2], 'base64')) === m[1];
  };
  const TYPES = ['ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com'];

  test('takes every key type OpenSSH writes, when the blob names the same type', () => {
    expect(isOpenSshPublicKey(ED25519)).toBe(true);
    for (const type of TYPES) {
      for (const size of [0, 1, 2, 3, 32, 279]) {
        const line = keyLine(type, type, crypto.randomBytes(size));
        expect({ line, ok: isOpenSshPublicKey(line) }).toEqual({ line, ok: true });
        expect(isOpenSshPublicKey(`${line} a comment`)).toBe(true);
      }
    }
  });

  test('agrees with the Buffer decoder on blobs naming another type, and on noise', () => {
    for (let i = 0; i < 500; i++) {
      const type = TYPES[i % TYPES.length];
      const lines = [
        keyLine(type, TYPES[(i + 1) % TYPES.length]),
        keyLine(type, type.slice(0, -1)),
        `${type} ${crypto.randomBytes(1 + (i % 60)).toString('base64')}`,
        `${type} ${crypto.randomBytes(1 + (i % 60)).toString('base64').replace(/=+$/, '')}`,
      ];
      for (const line of lines) expect({ line, ok: isOpenSshPublicKey(line) }).toEqual({ line, ok: withBuffer(line) });
    }
  });

  test('refuses options, unknown types and a missing blob', () => {
    expect(isOpenSshPublicKey(`no-pty ${ED25519}`)).toBe(false);
    expect(isOpenSshPublicKey(keyLine('ssh-dss'))).toBe(false);
    expect(isOpenSshPublicKey('ssh-ed25519')).toBe(false);
    expect(isOpenSshPublicKey('ssh-ed25519 ')).toBe(false);
  });
});
