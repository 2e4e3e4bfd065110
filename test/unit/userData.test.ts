import { parse } from 'yaml';
import { toInstallSpec } from '../../api/installRequest';
import { InvalidRequestError } from '../../api/errors';
import type { Config } from '../../lib/config';
import { installSecretsSchema, LIMITS } from '../../contract';
import { cicustomOf, mergedUserData, ownUserSnippet, parseUserData, userSnippetName } from '../../lib/vm/userData';
import { snippetRead, snippetRemove, snippetWrite } from '../../lib/proxmox/commands';

const base = { os: 'debian', version: '12' };

/** What the API answers a body: its secrets, or the problem its 400 names. */
function answer(body: Record<string, unknown>, apiMode = false) {
  const config = { limits: {}, defaultCiPassword: undefined, rootPassword: undefined, proxmoxApi: apiMode ? { urls: [] } : undefined } as unknown as Config;
  try {
    return toInstallSpec({ ...base, ...body }, config, ['pve1']);
  } catch (err) {
    if (err instanceof InvalidRequestError) return err.problem;
    throw err;
  }
}

describe('userData in an install body', () => {
  test('a #cloud-config mapping travels as a secret, never in the spec', () => {
    const userData = '#cloud-config\npackages: [curl]\nruncmd:\n  - echo hi\n';
    const a = answer({ userData });
    expect(typeof a).not.toBe('string');
    const { spec, secrets } = a as Exclude<typeof a, string>;
    expect(secrets.userData).toBe(userData);
    expect(JSON.stringify(spec)).not.toContain('packages');
  });

  test('a body without it gives what it gave before', () => {
    const a = answer({}) as Exclude<ReturnType<typeof answer>, string>;
    expect(a.secrets).toEqual({});
    expect('userData' in a.spec).toBe(false);
  });

  test.each<[string, unknown, RegExp]>([
    ['not a string', { packages: ['curl'] }, /^userData: must be a string holding a #cloud-config document$/],
    ['no #cloud-config line', 'packages: [curl]\n', /^userData: must start with a "#cloud-config" line/],
    ['a shell script', '#!/bin/sh\necho hi\n', /^userData: must start with a "#cloud-config" line/],
    ['too large', `#cloud-config\nruncmd:\n${'  - echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n'.repeat(3000)}`, new RegExp(`^userData: must be at most ${LIMITS.userDataBytes} bytes$`)],
    ['not YAML', '#cloud-config\npackages: [curl\n', /^userData: is not valid YAML \(\w+ at line \d+, column \d+\)$/],
    ['a list, not a mapping', '#cloud-config\n- curl\n', /^userData: must be a YAML mapping/],
    ['empty', '#cloud-config\n', /^userData: must be a YAML mapping/],
    ['a duplicate key', '#cloud-config\nruncmd: []\nruncmd: []\n', /^userData: is not valid YAML \(DUPLICATE_KEY/],
    ['packages not a list', '#cloud-config\npackages: curl\n', /^userData\.packages: must be a list$/],
    ['runcmd not a list', '#cloud-config\nruncmd: echo hi\n', /^userData\.runcmd: must be a list$/],
    ['a write_files entry without a path', '#cloud-config\nwrite_files:\n  - content: x\n', /^userData\.write_files\[0\]: must be a mapping with a "path"$/],
    ['a key that is not a string', '#cloud-config\nssh_authorized_keys: [1]\n', /^userData\.ssh_authorized_keys\[0\]: must be a string$/],
    ['users', '#cloud-config\nusers: [{name: eve}]\n', /^userData\.users: is set by QemuRun and cannot be given/],
    ['password', '#cloud-config\npassword: hunter2\n', /^userData\.password: is set by QemuRun/],
    ['chpasswd', '#cloud-config\nchpasswd: {expire: true}\n', /^userData\.chpasswd: is set by QemuRun/],
    ['user', '#cloud-config\nuser: eve\n', /^userData\.user: is set by QemuRun/],
    ['hostname', '#cloud-config\nhostname: other\n', /^userData\.hostname: is set by QemuRun/],
  ])('%s is a 400 naming the field', (_, userData, message) => {
    expect(answer({ userData })).toMatch(message);
  });

  // An alias bomb: nine aliases of nine aliases ... (about 60,000 strings once expanded).
  const bomb = `#cloud-config\na: &a [x, x, x, x, x, x, x, x, x]\n${['b', 'c', 'd', 'e', 'f']
    .map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcde'[i]}`).join(', ')}]`)
    .join('\n')}\n`;

  test.each<[string, string, RegExp]>([
    ['an alias bomb', bomb, /^userData: expands too many YAML aliases \(at most 100\)/],
    ['a merge key bringing an owned key', '#cloud-config\n<<: {password: hunter2}\nruncmd: []\n', /^userData\.<<: merge keys are not accepted/],
    ['a merge key bringing a key through an alias', '#cloud-config\nbase: &b {disable_root: false}\n<<: *b\n', /^userData\.<<: merge keys are not accepted/],
    ['a merge key deeper down', '#cloud-config\nwrite_files:\n  - <<: {path: /etc/motd}\n', /^userData\.write_files\[0\]\.<<: merge keys are not accepted/],
    ['a quoted << (written back plain, cloud-init would merge it)', '#cloud-config\n"<<": {password: x}\n', /^userData\.<<: merge keys are not accepted/],
  ])('%s is a 400 naming the field', (_, userData, message) => {
    expect(answer({ userData })).toMatch(message);
  });

  test('a YAML 1.1 document has its merges resolved by the parser: the owned key is seen', () => {
    expect(answer({ userData: '#cloud-config\n%YAML 1.1\n---\n<<: {disable_root: false}\nruncmd: []\n' })).toMatch(/^userData\.disable_root: is set by QemuRun/);
  });

  test.each(['__proto__', 'constructor', 'toString', 'hasOwnProperty'])('a key named %s is a key like any other: passed on, no prototype touched', (key) => {
    const userData = `#cloud-config\n${key}: {polluted: yes}\nruncmd: []\n`;
    const a = answer({ userData });
    expect(typeof a).not.toBe('string');
    const parsed = parseUserData(userData);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual([key, 'runcmd']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const merged = parse(mergedUserData({ hostname: 'h', user: 'debian', keys: [], packageUpgrade: false }, userData)) as Record<string, unknown>;
    expect(Object.keys(merged)).toContain(key);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('a YAML error does not echo the document (it may hold secrets)', () => {
    expect(answer({ userData: '#cloud-config\nsecret: "s3cr3t-value\n' })).not.toContain('s3cr3t');
  });

  test('API mode refuses it clearly, naming userData and why', () => {
    expect(answer({ userData: '#cloud-config\npackages: [curl]\n' }, true)).toMatch(/^userData: is not available in API mode: Proxmox's API cannot upload the cicustom snippet/);
  });

  test('the secrets schema the worker checks with takes it, with the same bounds', () => {
    expect(installSecretsSchema.safeParse({ userData: '#cloud-config\n{}\n' }).success).toBe(true);
    expect(installSecretsSchema.safeParse({ userData: 'packages: []' }).success).toBe(false);
  });
});

describe('the merged user-data', () => {
  const generated = { hostname: 'web-101', user: 'debian', passwordHash: '$5$abc$hash', keys: ['ssh-ed25519 AAAA service', 'ssh-ed25519 BBBB admin'], packageUpgrade: false };

  test("carries cloudinit_userdata's keys, then the caller's; the caller's keys come after QemuRun's", () => {
    const text = mergedUserData(generated, '#cloud-config\npackages: [curl]\nssh_authorized_keys: [ssh-ed25519 CCCC mine]\nwrite_files:\n  - path: /etc/motd\n    content: hi\nruncmd:\n  - [touch, /root/done]\n');
    expect(text.startsWith('#cloud-config\n')).toBe(true);
    const doc = parse(text) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(['hostname', 'manage_etc_hosts', 'fqdn', 'user', 'password', 'ssh_authorized_keys', 'chpasswd', 'users', 'packages', 'write_files', 'runcmd']);
    expect(doc).toMatchObject({
      hostname: 'web-101',
      fqdn: 'web-101',
      user: 'debian',
      password: '$5$abc$hash',
      ssh_authorized_keys: ['ssh-ed25519 AAAA service', 'ssh-ed25519 BBBB admin', 'ssh-ed25519 CCCC mine'],
      chpasswd: { expire: false },
      users: ['default'],
      packages: ['curl'],
      runcmd: [['touch', '/root/done']],
    });
    expect(doc.package_upgrade).toBeUndefined();
  });

  test('the fqdn takes the search domain, as get_hostname_fqdn does; no password without one', () => {
    const doc = parse(mergedUserData({ ...generated, passwordHash: undefined, searchDomain: 'example.com' }, '#cloud-config\nruncmd: []\n')) as Record<string, unknown>;
    expect(doc.fqdn).toBe('web-101.example.com');
    expect('password' in doc).toBe(false);
  });

  test('parseUserData is the rule both the API and configureVm apply', () => {
    expect(() => parseUserData('#cloud-config\nusers: []\n')).toThrow(/^userData\.users:/);
  });
});

describe('the snippet', () => {
  test('is named for the VM, and only that name counts as QemuRun\'s own', () => {
    expect(userSnippetName(101)).toBe('qemurun-101-user.yaml');
    expect(cicustomOf('local', 101)).toBe('user=local:snippets/qemurun-101-user.yaml');
    expect(ownUserSnippet('user=local:snippets/qemurun-101-user.yaml', 101)).toEqual({ storage: 'local', volid: 'local:snippets/qemurun-101-user.yaml' });
    expect(ownUserSnippet('network=local:snippets/n.yaml,user=snip:snippets/qemurun-101-user.yaml', 101)?.storage).toBe('snip');
    expect(ownUserSnippet('user=local:snippets/qemurun-102-user.yaml', 101)).toBeUndefined();
    expect(ownUserSnippet('user=local:snippets/mine.yaml', 101)).toBeUndefined();
    expect(ownUserSnippet(undefined, 101)).toBeUndefined();
  });

  test('is written, read and removed by fixed scripts: the volume is an argument, the content stdin', () => {
    for (const argv of [snippetWrite('local:snippets/qemurun-101-user.yaml'), snippetRead('local:snippets/qemurun-101-user.yaml'), snippetRemove('local:snippets/qemurun-101-user.yaml')]) {
      expect(argv.slice(0, 2)).toEqual(['sh', '-c']);
      expect(argv[2]).not.toContain('qemurun-101');
      expect(argv[2]).toContain('pvesm path "$1"');
      expect(argv.slice(3)).toEqual(['qemurun-snippet', 'local:snippets/qemurun-101-user.yaml']);
    }
    expect(snippetWrite('local:snippets/x.yaml')[2]).toContain('umask 077');
    for (const bad of ['local:snippets/../etc/passwd', 'local:images/x.yaml', "local:snippets/a';rm -rf /.yaml", '-x:snippets/a.yaml']) {
      expect(() => snippetWrite(bad)).toThrow(/invalid snippet volume/);
    }
  });
});
