import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  INIT_SCRIPT_VERSION,
  initScriptEnv,
  initScriptFor,
  listInitScripts,
  type InitScriptSettings,
} from '../../lib/initScripts';
import { OS_VERSIONS } from '../../contract';
import { hashRootPassword } from '../../lib/rootPassword';

/**
 * The init scripts are run for real, twice each, inside a bubblewrap jail: a private root
 * with its own /etc, the host's /usr read-only, no network, and a shim directory first on
 * PATH in which every privileged tool only records its argv (chpasswd also its stdin).
 */

const PRIVILEGED = [
  'sudo', 'apt-get', 'apt', 'dnf', 'yum', 'chpasswd', 'passwd', 'chage', 'usermod', 'useradd',
  'systemctl', 'timedatectl', 'hostnamectl', 'locale-gen', 'localectl', 'update-locale', 'sysctl',
  'fallocate', 'mkswap', 'swapon', 'swapoff', 'cloud-init', 'journalctl', 'dpkg-query', 'rpm',
];

// Not under /var/log: the seal phase empties that.
const LOG_DIR = '/var/lib/qemurun-test';

// sudo runs its command; fallocate makes the file (sparse) so a second run can find it.
// apt-get and dnf note what they install, and dpkg-query and rpm answer from that list.
// cloud-init clean removes its state, as the real one does.
// A tool that finds the root password in its environment is noted too.
const SHIM = `#!/bin/bash
tool=\${0##*/}
{ printf '%s' "$tool"; for arg in "$@"; do printf '\\t%s' "$arg"; done; printf '\\n'; } >>${LOG_DIR}/argv.log
if [[ -n \${QEMURUN_ROOT_PASSWORD:-} && $tool != sudo ]]; then echo "$tool" >>${LOG_DIR}/password-in-env.log; fi
case $tool in
  sudo)
    while [[ $# -gt 0 && $1 == -* ]]; do
      if [[ $1 == -- ]]; then shift; break; fi
      if [[ $1 == -u ]]; then shift; fi
      shift
    done
    exec "$@" ;;
  chpasswd) cat >>${LOG_DIR}/chpasswd.stdin ;;
  fallocate) truncate -s "$2" "$3" ;;
  apt-get|dnf)
    seen=0
    for arg in "$@"; do
      if ((seen)); then echo "$arg" >>${LOG_DIR}/installed; elif [[ $arg == install ]]; then seen=1; fi
    done ;;
  dpkg-query) if grep -qx -- "\${@: -1}" ${LOG_DIR}/installed 2>/dev/null; then printf installed; fi ;;
  rpm) grep -qx -- "\${@: -1}" ${LOG_DIR}/installed 2>/dev/null; exit ;;
  cloud-init)
    if [[ $1 == clean && " $* " == *" --help "* ]]; then
      printf '%s\n' 'usage: cloud-init clean [-h] [-l] [--machine-id] [-r] [-s]' '  -s, --seed  Remove cloud-init seed directory /var/lib/cloud/seed.'
    elif [[ $1 == clean ]]; then
      rm -rf /var/lib/cloud
      if [[ " $* " == *" --logs "* ]]; then rm -f /var/log/cloud-init.log /var/log/cloud-init-output.log; fi
    fi ;;
esac
exit 0
`;

const MIRROR = 'http://mirror.test.invalid/pub';
const PASSWORD = `s3cr3t pa$$ w'o"rd:x`;
const SETTINGS: InitScriptSettings = {
  mirror: MIRROR,
  timezone: 'Asia/Taipei',
  locale: 'en_US.UTF-8',
  packages: ['nginx', 'python3-pip'],
  swapSize: '2G',
};

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

type Family = 'debian' | 'ubuntu' | 'rockylinux';

const PASSWD = `root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
cloud:x:1000:1000:cloud user:/home/cloud:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
`;

const LOGIN_DEFS = `#
#	PASS_MIN_DAYS	Minimum number of days allowed between password changes.
PASS_MAX_DAYS	99999
PASS_MIN_DAYS	0
PASS_WARN_AGE	7
`;

const FSTAB = 'UUID=0b2a7f40-0000-4000-8000-000000000001 / ext4 rw,discard,errors=remount-ro 0 1\n';

const LOCALE_GEN = `# This file lists locales that you wish to have built.
# de_DE.UTF-8 UTF-8
# en_GB.UTF-8 UTF-8
# en_US ISO-8859-1
# en_US.UTF-8 UTF-8
`;

const DEB822_DEBIAN_MIRROR_METHOD = (codename: string) => `Types: deb deb-src
URIs: mirror+file:///etc/apt/mirrors/debian.list
Suites: ${codename} ${codename}-updates ${codename}-backports
Components: main

Types: deb deb-src
URIs: mirror+file:///etc/apt/mirrors/debian-security.list
Suites: ${codename}-security
Components: main
`;

const DEB822_DEBIAN = (codename: string) => `Types: deb
URIs: https://deb.debian.org/debian/
Suites: ${codename} ${codename}-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp

Types: deb
URIs: https://security.debian.org/debian-security
Suites: ${codename}-security
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp
`;

const LIST_DEBIAN = `deb http://deb.debian.org/debian bullseye main
deb-src http://deb.debian.org/debian bullseye main
deb http://security.debian.org/debian-security bullseye-security main
deb http://deb.debian.org/debian bullseye-updates main
deb [arch=amd64] https://download.docker.com/linux/debian bullseye stable
`;

const LIST_UBUNTU = (codename: string) => `## Note, this file is written by cloud-init on first boot of an instance
deb http://archive.ubuntu.com/ubuntu ${codename} main restricted
# deb-src http://archive.ubuntu.com/ubuntu ${codename} main restricted
deb http://archive.ubuntu.com/ubuntu ${codename}-updates main restricted
deb http://archive.ubuntu.com/ubuntu ${codename} universe multiverse
deb http://security.ubuntu.com/ubuntu ${codename}-security main restricted universe multiverse
`;

const DEB822_UBUNTU = `## Note, this file is written by cloud-init on first boot of an instance
Types: deb
URIs: http://archive.ubuntu.com/ubuntu/
Suites: noble noble-updates noble-backports
Components: main universe restricted multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: http://security.ubuntu.com/ubuntu/
Suites: noble-security
Components: main universe restricted multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
`;

const rockyRepo = (id: string, name: string, version: string) => `[${id}]
name=Rocky Linux $releasever - ${name}
mirrorlist=https://mirrors.rockylinux.org/mirrorlist?arch=$basearch&repo=${name}-$releasever$rltype
#baseurl=http://dl.rockylinux.org/$contentdir/$releasever/${name}/$basearch/os/
gpgcheck=1
enabled=1
countme=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-${version}
`;

const EPEL_REPO = `[epel]
name=Extra Packages for Enterprise Linux $releasever - $basearch
# It is much more secure to use the metalink, but if you wish to use a local mirror
# place its address here.
#baseurl=https://download.example/pub/epel/$releasever/Everything/$basearch/
metalink=https://mirrors.fedoraproject.org/metalink?repo=epel-$releasever&arch=$basearch&infra=$infra&content=$contentdir
enabled=1
gpgcheck=1

[epel-cisco-openh264]
name=Extra Packages for Enterprise Linux $releasever openh264 (From Cisco) - $basearch
metalink=https://mirrors.fedoraproject.org/metalink?repo=epel-cisco-openh264-$releasever&arch=$basearch
enabled=1
`;

const CODENAMES: Record<string, string> = {
  'debian 11': 'bullseye', 'debian 12': 'bookworm', 'debian 13': 'trixie',
  'ubuntu 20.04': 'focal', 'ubuntu 22.04': 'jammy', 'ubuntu 24.04': 'noble',
};

/** The package source file each image ships, which the mirror must land in. */
function sourceFixtures(family: Family, version: string): Record<string, string> {
  const codename = CODENAMES[`${family} ${version}`];
  switch (`${family} ${version}`) {
    case 'debian 11': return { 'etc/apt/sources.list': LIST_DEBIAN };
    case 'debian 12': return {
      'etc/apt/sources.list.d/debian.sources': DEB822_DEBIAN_MIRROR_METHOD(codename),
      'etc/apt/mirrors/debian.list': 'https://deb.debian.org/debian\n',
      'etc/apt/mirrors/debian-security.list': 'https://deb.debian.org/debian-security\n',
    };
    case 'debian 13': return { 'etc/apt/sources.list.d/debian.sources': DEB822_DEBIAN(codename) };
    case 'ubuntu 24.04': return {
      'etc/apt/sources.list.d/ubuntu.sources': DEB822_UBUNTU,
      'etc/apt/sources.list': '# Ubuntu sources have moved to /etc/apt/sources.list.d/ubuntu.sources\n',
    };
    case 'rockylinux 8': return {
      'etc/yum.repos.d/Rocky-BaseOS.repo': rockyRepo('baseos', 'BaseOS', '8'),
      'etc/yum.repos.d/Rocky-AppStream.repo': rockyRepo('appstream', 'AppStream', '8'),
      'etc/yum.repos.d/epel.repo': EPEL_REPO,
    };
    default:
      if (family === 'ubuntu') return { 'etc/apt/sources.list': LIST_UBUNTU(codename) };
      return {
        'etc/yum.repos.d/rocky.repo': rockyRepo('baseos', 'BaseOS', version) + '\n' + rockyRepo('appstream', 'AppStream', version),
        'etc/yum.repos.d/rocky-extras.repo': rockyRepo('extras', 'extras', version),
        'etc/yum.repos.d/epel.repo': EPEL_REPO,
      };
  }
}

function osRelease(family: Family, version: string): string {
  if (family === 'rockylinux') return `NAME="Rocky Linux"\nVERSION="${version}.4 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="${version}.4"\n`;
  if (family === 'ubuntu') return `PRETTY_NAME="Ubuntu ${version} LTS"\nNAME="Ubuntu"\nVERSION_ID="${version}"\nID=ubuntu\nID_LIKE=debian\n`;
  return `PRETTY_NAME="Debian GNU/Linux ${version}"\nNAME="Debian GNU/Linux"\nVERSION_ID="${version}"\nID=debian\n`;
}

let workDir: string;
let shimDir: string;

beforeAll(() => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-init-'));
  shimDir = path.join(workDir, 'shims');
  fs.mkdirSync(shimDir);
  fs.writeFileSync(path.join(shimDir, 'shim'), SHIM, { mode: 0o755 });
  for (const tool of PRIVILEGED) fs.symlinkSync('shim', path.join(shimDir, tool));
});

afterAll(() => {
  fs.rmSync(workDir, { recursive: true, force: true });
});

interface Jail {
  root: string;
  read(rel: string): string;
  exists(rel: string): boolean;
}

function makeJail(name: string, family: Family, version: string): Jail {
  const root = path.join(workDir, name);
  const files: Record<string, string> = {
    'etc/os-release': osRelease(family, version),
    'etc/passwd': PASSWD,
    'etc/login.defs': LOGIN_DEFS,
    'etc/fstab': FSTAB,
    'etc/sysctl.d/README.sysctl': 'sysctl drop-ins go here\n',
    ...(family === 'rockylinux' ? {} : { 'etc/locale.gen': LOCALE_GEN }),
    ...sourceFixtures(family, version),
  };
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  for (const dir of ['usr', 'tmp', 'root', 'var/lib', LOG_DIR.slice(1)]) fs.mkdirSync(path.join(root, dir), { recursive: true });
  // The host's /bin, /lib64, ... are symlinks into /usr (merged /usr) or directories.
  for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const stat = fs.lstatSync(`/${top}`, { throwIfNoEntry: false });
    if (stat?.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(`/${top}`), path.join(root, top));
    else if (stat?.isDirectory()) fs.mkdirSync(path.join(root, top));
  }
  return {
    root,
    read: (rel) => fs.readFileSync(path.join(root, rel), 'utf8'),
    exists: (rel) => fs.existsSync(path.join(root, rel)),
  };
}

interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
  /** One array per privileged call: the tool, then its arguments. */
  calls: string[][];
  argvLog: string;
}

/**
 * Runs a script as the install activity does: `export` lines for the settings in front of
 * the script text, all of it on the stdin of `sudo bash -s`. `env` is set in the jail's
 * environment instead.
 */
function runInJail(jail: Jail, script: string, exports: Record<string, string>, env: Record<string, string> = {}): RunResult {
  const argvLog = path.join(jail.root, LOG_DIR.slice(1), 'argv.log');
  fs.rmSync(argvLog, { force: true });
  const binds: string[] = [];
  for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    if (fs.lstatSync(`/${top}`, { throwIfNoEntry: false })?.isDirectory()) binds.push('--ro-bind', `/${top}`, `/${top}`);
  }
  const args = [
    '--bind', jail.root, '/',
    '--ro-bind', '/usr', '/usr',
    ...binds,
    '--ro-bind', shimDir, '/opt/qemurun-shims',
    '--proc', '/proc',
    '--dev', '/dev',
    '--unshare-all',
    '--die-with-parent',
    '--clearenv',
    '--setenv', 'PATH', '/opt/qemurun-shims:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    '--setenv', 'HOME', '/root',
    ...Object.entries(env).flatMap(([k, v]) => ['--setenv', k, v]),
    '--chdir', '/',
    '/bin/bash', '-c', 'exec sudo bash -s',
  ];
  const preamble = Object.entries(exports).map(([k, v]) => `export ${k}=${shellQuote(v)}\n`).join('');
  const res = spawnSync('bwrap', args, { input: preamble + script, encoding: 'utf8', timeout: 30_000 });
  if (res.error) throw res.error;
  const log = fs.existsSync(argvLog) ? fs.readFileSync(argvLog, 'utf8') : '';
  return {
    status: res.status,
    stdout: res.stdout,
    stderr: res.stderr,
    calls: log.split('\n').filter(Boolean).map((line) => line.split('\t')),
    argvLog: log,
  };
}

function shellcheck(script: string, text: string): Promise<{ script: string; status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('shellcheck', ['--norc', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ script, status, output }));
    child.stdin.end(text);
  });
}

const called = (r: RunResult, ...prefix: string[]) => r.calls.filter((c) => prefix.every((p, i) => c[i] === p));
const activeLines = (text: string) => text.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));

const ALL = Object.entries(OS_VERSIONS).flatMap(([family, versions]) => versions.map((v) => [family as Family, v] as const));

describe('lib/initScripts', () => {
  test('every supported OS/version has a script; unknown pairs throw', () => {
    expect(listInitScripts()).toEqual(ALL.map(([o, version]) => ({ os: o, version, file: `${o}_${version}.sh` })));
    for (const [family, version] of ALL) {
      const text = initScriptFor(family, version);
      expect(text.startsWith('#!/usr/bin/env bash\n')).toBe(true);
      expect(text).toContain(`QR_OS=${family}\nQR_VERSION=${version}\n`);
      expect(text).toContain(`QR_SCRIPT_VERSION=${INIT_SCRIPT_VERSION}\n`);
      // Self-contained: nothing left to source on the VM.
      expect(text).not.toMatch(/^\s*(source|\.)\s/m);
    }
    expect(() => initScriptFor('debian', '10')).toThrow(/no init script for debian 10/);
    expect(() => initScriptFor('centos', '9')).toThrow();
    expect(() => initScriptFor('toString', '')).toThrow();
    expect(INIT_SCRIPT_VERSION).toMatch(/^[0-9a-f]{12}$/);
  });

  test('shellcheck passes on every generated script', async () => {
    const results = await Promise.all(ALL.map(([family, version]) => shellcheck(`${family}_${version}`, initScriptFor(family, version))));
    for (const result of results) expect(result).toEqual({ script: result.script, status: 0, output: '' });
  });

  test('initScriptEnv carries the settings and the password only when given', () => {
    expect(initScriptEnv(SETTINGS, 'pw')).toEqual({
      QEMURUN_MIRROR: MIRROR,
      QEMURUN_TIMEZONE: 'Asia/Taipei',
      QEMURUN_LOCALE: 'en_US.UTF-8',
      QEMURUN_PACKAGES: 'nginx python3-pip',
      QEMURUN_SWAP_SIZE: '2G',
      QEMURUN_ROOT_PASSWORD: 'pw',
    });
    const env = initScriptEnv({ timezone: 'UTC', locale: 'C.UTF-8', packages: [], swapSize: '0', mirror: 'https://m.example/' });
    expect(env).toEqual({ QEMURUN_MIRROR: 'https://m.example', QEMURUN_TIMEZONE: 'UTC', QEMURUN_LOCALE: 'C.UTF-8', QEMURUN_PACKAGES: '', QEMURUN_SWAP_SIZE: '0' });
    expect(initScriptEnv({ ...SETTINGS, mirror: undefined }, '').QEMURUN_MIRROR).toBe('');
  });

  test.each<[string, Partial<InitScriptSettings>, RegExp]>([
    ['a shell command as a package', { packages: ['vim;', 'touch'] }, /invalid package name: 'vim;'/],
    ['an option as a package', { packages: ['-oAPT::x'] }, /invalid package name/],
    ['an upper-case package', { packages: ['Vim'] }, /invalid package name/],
    ['an ftp mirror', { mirror: 'ftp://x' }, /mirror/],
    ['a mirror with a space', { mirror: 'http://x/a b' }, /mirror/],
    ['a path as timezone', { timezone: '../etc/passwd' }, /timezone/],
    ['a command in the locale', { locale: 'en_US.UTF-8; reboot' }, /locale/],
    ['a swap size without unit', { swapSize: '2048' }, /swap size/],
    ['a swap size in TB', { swapSize: '2T' }, /swap size/],
  ])('initScriptEnv rejects %s', (_name, change, message) => {
    expect(() => initScriptEnv({ ...SETTINGS, ...change })).toThrow(message);
  });

  test('initScriptEnv sends QEMURUN_PHASE only for a phase other than the full run', () => {
    expect(initScriptEnv(SETTINGS)).not.toHaveProperty('QEMURUN_PHASE');
    expect(initScriptEnv(SETTINGS, undefined, 'seal').QEMURUN_PHASE).toBe('seal');
    expect(() => initScriptEnv(SETTINGS, undefined, 'full' as never)).toThrow(/phase must be template, seal or clone: 'full'/);
  });

  test('initScriptEnv rejects a multi-line root password', () => {
    expect(() => initScriptEnv(SETTINGS, 'a\nb')).toThrow(/one line/);
  });
});

describe('init scripts in a bubblewrap jail', () => {
  test('a run waits for an earlier one still going, as a retry beside a run cut off with its SSH session must', () => {
    const jail = makeJail('takes-turns', 'debian', '12');
    const lock = path.join(jail.root, 'var/lib/qemurun/init.lock');
    fs.mkdirSync(path.dirname(lock), { recursive: true });
    // The earlier run, as the kernel sees it: a process holding the script's lock for 2 s.
    const earlier = spawn('flock', [lock, 'sleep', '2'], { stdio: 'ignore' });
    try {
      const deadline = Date.now() + 5000;
      while (spawnSync('flock', ['-n', lock, 'true']).status === 0 && Date.now() < deadline);
      const run = runInJail(jail, initScriptFor('debian', '12'), initScriptEnv(SETTINGS, PASSWORD));
      expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
      const lines = run.stdout.split('\n');
      const waited = lines.indexOf('[*] waiting for an earlier run of this script to finish (/var/lib/qemurun/init.lock)');
      // It waited before touching anything, then did the whole run.
      expect(waited).toBeGreaterThan(0);
      expect(lines.findIndex((l) => l.startsWith('[*] pointing apt at') || l.startsWith('[*] keeping the image'))).toBeGreaterThan(waited);
      expect(run.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
    } finally {
      earlier.kill();
    }
  });

  test.each(ALL)('%s %s runs twice and converges', (family, version) => {
    const jail = makeJail(`${family}_${version}`, family, version);
    const script = initScriptFor(family, version);
    const env = initScriptEnv(SETTINGS, PASSWORD);

    const first = runInJail(jail, script, env);
    expect({ status: first.status, stderr: first.stderr }).toEqual({ status: 0, stderr: '' });
    const second = runInJail(jail, script, env);
    expect({ status: second.status, stderr: second.stderr }).toEqual({ status: 0, stderr: '' });

    for (const run of [first, second]) {
      expect(run.stdout).toMatch(/^\[\*\] setting timezone to Asia\/Taipei$/m);
      expect(run.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
      // The password reaches chpasswd on stdin only: not in any argv, not in the output.
      expect(run.argvLog).not.toContain('s3cr3t');
      expect(run.stdout + run.stderr).not.toContain('s3cr3t');
      expect(called(run, 'chpasswd')).toEqual([['chpasswd']]);
      expect(called(run, 'chage')).toEqual([['chage', '--mindays', '99999', 'cloud']]);
      expect(called(run, 'timedatectl')).toEqual([['timedatectl', 'set-timezone', 'Asia/Taipei']]);
      expect(called(run, 'sysctl')).toEqual([['sysctl', '--system']]);
      expect(called(run, 'systemctl')).toEqual([['systemctl', 'enable', '--now', 'qemu-guest-agent']]);
      const install = run.calls.find((c) => c.includes('install') && c.includes('qemu-guest-agent'));
      expect(install?.slice(-3)).toEqual(['qemu-guest-agent', 'nginx', 'python3-pip']);
    }
    expect(jail.read(`${LOG_DIR.slice(1)}/chpasswd.stdin`)).toBe(`root:${PASSWORD}\n`.repeat(2));
    expect(jail.exists(`${LOG_DIR.slice(1)}/password-in-env.log`)).toBe(false);

    // The full upgrade runs once; the second run finds the marker and skips it.
    const upgrades = (r: RunResult) => r.calls.filter((c) => c.includes('dist-upgrade') || (c[0] === 'dnf' && c.includes('upgrade')));
    expect(upgrades(first)).toHaveLength(1);
    expect(upgrades(second)).toHaveLength(0);
    expect(second.stdout).toContain('skipping the full upgrade');
    expect(jail.read('var/lib/qemurun/init-done')).toBe(`${INIT_SCRIPT_VERSION}\n`);

    // One swap file, made once, one fstab line; the image's own lines are kept.
    expect(called(first, 'fallocate')).toEqual([['fallocate', '-l', '2G', '/swapfile.new']]);
    expect(called(second, 'fallocate')).toEqual([]);
    expect(fs.statSync(path.join(jail.root, 'swapfile')).size).toBe(2 * 1024 ** 3);
    expect(fs.statSync(path.join(jail.root, 'swapfile')).mode & 0o777).toBe(0o600);
    expect(jail.read('etc/fstab')).toBe(`${FSTAB}/swapfile none swap sw 0 0\n`);

    // One sysctl drop-in; no temporary files left behind.
    expect(fs.readdirSync(path.join(jail.root, 'etc/sysctl.d')).sort()).toEqual(['90-qemurun.conf', 'README.sysctl']);
    const sysctlKeys = activeLines(jail.read('etc/sysctl.d/90-qemurun.conf')).map((l) => l.split('=')[0].trim());
    expect(new Set(sysctlKeys).size).toBe(sysctlKeys.length);
    expect(sysctlKeys).toContain('vm.swappiness');
    const leftovers = spawnSync('find', [jail.root, '-name', '.qemurun.*'], { encoding: 'utf8' }).stdout;
    expect(leftovers).toBe('');

    // Password changes: one PASS_MIN_DAYS line, the comment describing it untouched.
    expect(jail.read('etc/login.defs')).toBe(LOGIN_DEFS.replace('PASS_MIN_DAYS\t0', 'PASS_MIN_DAYS\t99999'));

    if (family === 'rockylinux') {
      for (const [rel, original] of Object.entries(sourceFixtures(family, version))) {
        const text = jail.read(rel);
        expect(activeLines(text).filter((l) => /^(mirrorlist|metalink)=/.test(l) && !l.includes('cisco'))).toEqual([]);
        const baseurls = activeLines(text).filter((l) => l.startsWith('baseurl='));
        expect(baseurls.length).toBeGreaterThan(0);
        for (const b of baseurls) expect(b).toMatch(rel.endsWith('epel.repo') ? `baseurl=${MIRROR}/epel/$releasever/Everything/$basearch/` : new RegExp(`^baseurl=${MIRROR}/rocky/\\$releasever/\\w+/\\$basearch/os/$`));
        expect(jail.read(`var/lib/qemurun/orig/${rel}`)).toBe(original);
      }
      // The section without an official baseurl keeps its metalink.
      expect(jail.read('etc/yum.repos.d/epel.repo')).toMatch(/^metalink=.*openh264/m);
      expect(called(first, 'dnf', '-y', 'install', 'epel-release')).toHaveLength(1);
    } else {
      const primary = family === 'debian' && version === '11' ? 'etc/apt/sources.list'
        : family === 'ubuntu' && version !== '24.04' ? 'etc/apt/sources.list'
        : `etc/apt/sources.list.d/${family}.sources`;
      const text = jail.read(primary);
      const uris = activeLines(text).flatMap((l) => (l.startsWith('URIs:') ? l.split(/\s+/).slice(1) : l.startsWith('deb') ? [l.replace(/\[[^\]]*\]\s*/, '').split(/\s+/)[1]] : []));
      expect(uris.length).toBeGreaterThan(0);
      const expected = family === 'ubuntu' ? [`${MIRROR}/ubuntu/`] : [`${MIRROR}/debian`, `${MIRROR}/debian-security`];
      for (const uri of uris) expect([...expected, 'https://download.docker.com/linux/debian']).toContain(uri);
      expect(uris).toEqual(expect.arrayContaining(expected));
      expect(text).not.toMatch(/^(?!#).*(deb\.debian\.org|security\.debian|ubuntu\.com|mirror\+file)/m);
      expect(jail.read(`var/lib/qemurun/orig/${primary}`)).toBe(sourceFixtures(family, version)[primary]);

      const localeGen = jail.read('etc/locale.gen');
      expect(localeGen.split('\n').filter((l) => l.includes('en_US.UTF-8'))).toEqual(['en_US.UTF-8 UTF-8']);
      expect(called(second, 'update-locale')).toEqual([['update-locale', 'LANG=en_US.UTF-8']]);
      expect(called(second, 'locale-gen')).toEqual(family === 'ubuntu' ? [['locale-gen', 'en_US.UTF-8']] : [['locale-gen']]);
    }
  });

  test('a bad package name is refused before anything runs', () => {
    const jail = makeJail('bad-packages', 'debian', '12');
    const res = runInJail(jail, initScriptFor('debian', '12'), {}, { QEMURUN_PACKAGES: 'vim; touch /tmp/x' });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain("invalid package name 'vim;'");
    expect(res.stderr).toContain("invalid package name '/tmp/x'");
    expect(res.calls).toEqual([['sudo', 'bash', '-s']]);
    expect(jail.exists('tmp/x')).toBe(false);
    expect(jail.exists('var/lib/qemurun')).toBe(false);
    expect(jail.read('etc/fstab')).toBe(FSTAB);
  });

  test("the service's form of the root password: its crypt hash, set with chpasswd -e", () => {
    const jail = makeJail('hash', 'debian', '12');
    const hash = hashRootPassword(PASSWORD);
    const res = runInJail(jail, initScriptFor('debian', '12'), initScriptEnv(SETTINGS, { hash }));
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: '' });
    expect(called(res, 'chpasswd')).toEqual([['chpasswd', '-e']]);
    expect(jail.read(`${LOG_DIR.slice(1)}/chpasswd.stdin`)).toBe(`root:${hash}\n`);
    expect(res.argvLog + res.stdout + res.stderr).not.toContain(hash);
  });

  test('without settings the documented defaults apply', () => {
    const jail = makeJail('defaults', 'ubuntu', '24.04');
    const res = runInJail(jail, initScriptFor('ubuntu', '24.04'), {});
    expect(res.status).toBe(0);
    // No root password: root's is locked, none is set.
    expect(jail.exists(`${LOG_DIR.slice(1)}/chpasswd.stdin`)).toBe(false);
    expect(called(res, 'passwd')).toEqual([['passwd', '-l', 'root']]);
    expect(called(res, 'timedatectl')).toEqual([['timedatectl', 'set-timezone', 'UTC']]);
    expect(called(res, 'update-locale')).toEqual([['update-locale', 'LANG=en_US.UTF-8']]);
    expect(called(res, 'fallocate')).toEqual([['fallocate', '-l', '2G', '/swapfile.new']]);
    // No mirror: the image's sources stay as they are.
    expect(jail.read('etc/apt/sources.list.d/ubuntu.sources')).toBe(DEB822_UBUNTU);
    expect(jail.exists('var/lib/qemurun/orig')).toBe(false);
  });

  test('a later run with changed settings converges to them', () => {
    const jail = makeJail('converge', 'debian', '13');
    const script = initScriptFor('debian', '13');
    expect(runInJail(jail, script, initScriptEnv(SETTINGS)).status).toBe(0);

    const other = 'https://other.test.invalid';
    const changed = runInJail(jail, script, initScriptEnv({ ...SETTINGS, mirror: other, swapSize: '0', timezone: 'UTC' }));
    expect(changed.status).toBe(0);
    const sources = jail.read('etc/apt/sources.list.d/debian.sources');
    expect(sources).toContain(`URIs: ${other}/debian\n`);
    expect(sources).toContain(`URIs: ${other}/debian-security\n`);
    expect(sources).not.toContain(MIRROR);
    expect(jail.read('etc/fstab')).toBe(FSTAB);
    expect(jail.exists('swapfile')).toBe(false);
    expect(called(changed, 'timedatectl')).toEqual([['timedatectl', 'set-timezone', 'UTC']]);

    // An empty mirror puts the image's sources back.
    const restored = runInJail(jail, script, initScriptEnv({ ...SETTINGS, mirror: undefined, swapSize: '512M' }));
    expect(restored.status).toBe(0);
    expect(jail.read('etc/apt/sources.list.d/debian.sources')).toBe(DEB822_DEBIAN('trixie'));
    expect(called(restored, 'fallocate')).toEqual([['fallocate', '-l', '512M', '/swapfile.new']]);
    expect(jail.read('etc/fstab').match(/swapfile/g)).toHaveLength(1);
  });

  // What a booted cloud image has that a clone must not inherit.
  const SEALED_AWAY: Record<string, string> = {
    'etc/machine-id': '0f3c1e5f8a1b4c7d9e2f00112233aabb\n',
    'var/lib/dbus/machine-id': '0f3c1e5f8a1b4c7d9e2f00112233aabb\n',
    'etc/ssh/ssh_host_ed25519_key': 'PRIVATE\n',
    'etc/ssh/ssh_host_ed25519_key.pub': 'ssh-ed25519 AAAA root@template\n',
    'etc/ssh/ssh_host_rsa_key': 'PRIVATE\n',
    'var/lib/cloud/data/instance-id': 'iid-template\n',
    'var/log/cloud-init.log': 'cloud-init ran\n',
    'var/log/syslog': 'template booted\n',
    'var/log/syslog.1': 'older\n',
    'var/log/dpkg.log.2.gz': 'gz',
    'root/.bash_history': 'ls\n',
    'var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease': 'lists\n',
    'var/lib/systemd/random-seed': 'seed',
  };
  const upgrades = (r: RunResult) => r.calls.filter((c) => c.includes('dist-upgrade') || (c[0] === 'dnf' && c.includes('upgrade')));
  const refreshes = (r: RunResult) => r.calls.filter((c) => c.includes('update') || c.includes('makecache'));

  test.each<[Family, string]>([['debian', '12'], ['ubuntu', '24.04'], ['rockylinux', '9']])(
    '%s %s: template, then seal, then clone on one root; the clone skips the upgrade',
    (family, version) => {
      const jail = makeJail(`phases-${family}_${version}`, family, version);
      for (const [rel, text] of Object.entries(SEALED_AWAY)) {
        fs.mkdirSync(path.dirname(path.join(jail.root, rel)), { recursive: true });
        fs.writeFileSync(path.join(jail.root, rel), text);
      }
      const script = initScriptFor(family, version);

      const template = runInJail(jail, script, initScriptEnv(SETTINGS, undefined, 'template'));
      expect({ status: template.status, stderr: template.stderr }).toEqual({ status: 0, stderr: '' });
      expect(template.stdout).toMatch(/^\[\*\] QemuRun init script \w+ for \w+ [\d.]+, phase template$/m);
      expect(template.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
      expect(upgrades(template)).toHaveLength(1);
      const install = template.calls.find((c) => c.includes('install') && c.includes('qemu-guest-agent'));
      expect(install?.slice(-3)).toEqual(['qemu-guest-agent', 'nginx', 'python3-pip']);
      expect(called(template, 'systemctl')).toEqual([['systemctl', 'enable', '--now', 'qemu-guest-agent']]);
      // Nothing of one VM: no password, account, time zone or swap.
      for (const tool of ['chpasswd', 'passwd', 'chage', 'useradd', 'timedatectl', 'fallocate', 'swapon']) expect(called(template, tool)).toEqual([]);
      expect(jail.exists('swapfile')).toBe(false);
      expect(jail.read('var/lib/qemurun/init-done')).toBe(`${INIT_SCRIPT_VERSION}\n`);

      const seal = runInJail(jail, script, initScriptEnv(SETTINGS, undefined, 'seal'));
      expect({ status: seal.status, stderr: seal.stderr }).toEqual({ status: 0, stderr: '' });
      expect(seal.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
      expect(called(seal, 'cloud-init', 'clean')).toEqual([['cloud-init', 'clean', '--help'], ['cloud-init', 'clean', '--logs', '--seed']]);
      expect(jail.exists('var/lib/cloud')).toBe(false);
      // Clones keep the template's recorded grub install device (cc_grub_dpkg's `enabled`).
      expect(jail.read('etc/cloud/cloud.cfg.d/90-qemurun-clone.cfg')).toMatch(/^grub_dpkg:\n {2}enabled: false\n$/m);
      expect(jail.read('etc/machine-id')).toBe('');
      expect(fs.readlinkSync(path.join(jail.root, 'var/lib/dbus/machine-id'))).toBe('/etc/machine-id');
      expect(fs.readdirSync(path.join(jail.root, 'etc/ssh'))).toEqual([]);
      expect(jail.read('var/log/syslog')).toBe('');
      for (const gone of ['var/log/syslog.1', 'var/log/dpkg.log.2.gz', 'var/log/cloud-init.log', 'root/.bash_history', 'var/lib/systemd/random-seed']) expect(jail.exists(gone)).toBe(false);
      expect(called(seal, 'journalctl')).toEqual([['journalctl', '--rotate'], ['journalctl', '--vacuum-time=1s']]);
      if (family === 'rockylinux') expect(called(seal, 'dnf')).toEqual([['dnf', '-y', 'clean', 'all']]);
      else {
        expect(called(seal, 'apt-get').map((c) => c.at(-1))).toEqual(['clean']);
        expect(fs.readdirSync(path.join(jail.root, 'var/lib/apt/lists'))).toEqual([]);
      }
      expect(upgrades(seal)).toEqual([]);
      // The marker stays for the clone.
      expect(jail.read('var/lib/qemurun/init-done')).toBe(`${INIT_SCRIPT_VERSION}\n`);

      const packages = [...SETTINGS.packages, 'postgresql'];
      const clone = runInJail(jail, script, initScriptEnv({ ...SETTINGS, packages }, PASSWORD, 'clone'));
      expect({ status: clone.status, stderr: clone.stderr }).toEqual({ status: 0, stderr: '' });
      expect(clone.stdout).toContain('skipping package sources, the upgrade and the base packages');
      expect(clone.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
      expect(upgrades(clone)).toEqual([]);
      expect(called(clone, 'dnf', '-y', 'install', 'epel-release')).toEqual([]);
      // Only what the template lacks, after a metadata refresh (the seal removed the lists).
      expect(refreshes(clone)).toHaveLength(1);
      expect(clone.calls.filter((c) => c.includes('install')).map((c) => c.slice(c.indexOf('install') + 1))).toEqual([['postgresql']]);
      expect(called(clone, 'chpasswd')).toEqual([['chpasswd']]);
      expect(called(clone, 'chage')).toEqual([['chage', '--mindays', '99999', 'cloud']]);
      expect(called(clone, 'timedatectl')).toEqual([['timedatectl', 'set-timezone', 'Asia/Taipei']]);
      expect(called(clone, 'fallocate')).toEqual([['fallocate', '-l', '2G', '/swapfile.new']]);
      expect(clone.argvLog + clone.stdout + clone.stderr).not.toContain('s3cr3t');

      expect(called(clone, 'cloud-init', 'status')).toEqual([['cloud-init', 'status', '--wait']]);

      // With every package on the template, a clone touches no package manager at all; and
      // once cloud-init has linked its result for this boot, there is no cloud-init to wait for.
      fs.mkdirSync(path.join(jail.root, 'run/cloud-init'), { recursive: true });
      fs.writeFileSync(path.join(jail.root, 'run/cloud-init/result.json'), '{"v1": {"datasource": "DataSourceNoCloud", "errors": []}}\n');
      const again = runInJail(jail, script, initScriptEnv(SETTINGS, PASSWORD, 'clone'));
      expect(again.status).toBe(0);
      expect(called(again, 'cloud-init')).toEqual([]);
      expect(again.stdout).toContain('every package is on the template already: nginx python3-pip');
      expect(again.calls.filter((c) => ['apt-get', 'apt', 'dnf'].includes(c[0]))).toEqual([]);
    },
  );

  test('a clone without the marker, or with another version, runs the full script and says why', () => {
    const jail = makeJail('clone-unmarked', 'debian', '12');
    const script = initScriptFor('debian', '12');
    const env = initScriptEnv(SETTINGS, PASSWORD, 'clone');

    const first = runInJail(jail, script, env);
    expect({ status: first.status, stderr: first.stderr }).toEqual({ status: 0, stderr: '' });
    expect(first.stdout.split('\n').filter((l) => l.includes('instead of the clone phase'))).toEqual([
      '[*] running the full script instead of the clone phase: no template marker (/var/lib/qemurun/init-done)',
    ]);
    expect(upgrades(first)).toHaveLength(1);
    expect(first.calls.find((c) => c.includes('install') && c.includes('qemu-guest-agent'))).toBeDefined();
    expect(first.stdout).toMatch(/^\[\+\] init script finished in \d+s$/m);
    expect(jail.read('var/lib/qemurun/init-done')).toBe(`${INIT_SCRIPT_VERSION}\n`);

    fs.writeFileSync(path.join(jail.root, 'var/lib/qemurun/init-done'), '0123456789ab\n');
    const older = runInJail(jail, script, env);
    expect(older.status).toBe(0);
    expect(older.stdout).toContain(`[*] running the full script instead of the clone phase: the template was made by script version 0123456789ab, this is ${INIT_SCRIPT_VERSION}\n`);
    expect(upgrades(older)).toHaveLength(1);
  });

  test('a bad phase is refused before anything runs', () => {
    const jail = makeJail('bad-phase', 'debian', '12');
    const res = runInJail(jail, initScriptFor('debian', '12'), initScriptEnv(SETTINGS), { QEMURUN_PHASE: 'golden' });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain("QEMURUN_PHASE must be full, template, seal or clone: 'golden'");
    expect(res.calls).toEqual([['sudo', 'bash', '-s']]);
    expect(jail.exists('var/lib/qemurun')).toBe(false);
  });

  test('a script refuses to run on another OS', () => {
    const jail = makeJail('wrong-os', 'debian', '12');
    const res = runInJail(jail, initScriptFor('ubuntu', '24.04'), initScriptEnv(SETTINGS));
    expect(res.status).toBe(1);
    expect(res.stderr).toContain("this script is for ubuntu 24.04, but /etc/os-release says 'debian' '12'");
    expect(res.calls).toEqual([['sudo', 'bash', '-s']]);
  });
});
