import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { SHIMS, shimScript, sudoScript } from './shims';
import { osRelease, type GuestOs } from './guestOs';

/**
 * The guest's root file system: a directory per VM that persists across reboots (it is
 * the content of the VM's disk). The first boot seeds it with what a cloud image has in
 * /etc; host /usr (and the /bin, /lib* links into it) is bound read-only at exec time.
 * Every boot then plays cloud-init: users, authorized keys, password, hostname.
 */

/** Host /etc entries a guest needs for bash and coreutils to work (linker, alternatives, nss). */
const HOST_ETC = [
  'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'nsswitch.conf', 'bash.bashrc', 'profile', 'profile.d',
  'shells', 'inputrc', 'environment', 'login.defs', 'localtime', 'timezone', 'host.conf', 'ssl', 'ca-certificates.conf',
  'skel', 'debian_version', 'mime.types', 'magic',
];

export interface CloudInit {
  hostname: string;
  /** Users to create (the cloud-init user and the OS default user[s]), first gets uid 1000. */
  users: string[];
  keys: string[];
  passwordHash?: string;
}

function write(file: string, content: string, mode = 0o644, owner?: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content, { mode });
  fs.chmodSync(file, mode);
  if (owner !== undefined) fs.chownSync(file, owner, owner);
}

function writeIfAbsent(file: string, content: string, mode = 0o644): void {
  if (!fs.existsSync(file)) write(file, content, mode);
}

function seed(root: string, os: GuestOs): void {
  for (const d of ['etc', 'root', 'home', 'var/log', 'var/lib', 'var/cache', 'var/tmp', 'tmp', 'opt', 'srv', 'mnt', 'media', 'usr/local/bin', 'usr/local/sbin', 'usr/local/lib', 'usr/local/share', 'usr/local/etc', 'proc', 'dev', 'run', 'sys']) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.chmodSync(path.join(root, 'var/tmp'), 0o1777);
  fs.chmodSync(path.join(root, 'root'), 0o700);
  // Mirror the host's merged-/usr links (/bin -> usr/bin ...); real directories are bound.
  for (const l of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    try {
      const target = fs.readlinkSync(`/${l}`);
      fs.symlinkSync(target, path.join(root, l));
    } catch {
      // not a link on this host (or absent): bound or skipped at exec time
    }
  }
  const present = HOST_ETC.filter((e) => fs.existsSync(`/etc/${e}`)).map((e) => `/etc/${e}`);
  if (present.length) execFileSync('cp', ['-a', ...present, path.join(root, 'etc')]);

  const etc = (f: string) => path.join(root, 'etc', f);
  write(etc('os-release'), osRelease(os));
  write(etc('fstab'), '# /etc/fstab: static file system information.\nPARTUUID=7c5b8f3e-01 / ext4 rw,discard,errors=remount-ro,x-systemd.growfs 0 1\n');
  write(etc('resolv.conf'), 'nameserver 127.0.0.53\noptions edns0 trust-ad\n');
  write(etc('sysctl.conf'), '# /etc/sysctl.conf - Configuration file for setting system variables\n');
  fs.mkdirSync(etc('sysctl.d'), { recursive: true });
  fs.mkdirSync(etc('sudoers.d'), { recursive: true });
  write(etc('ssh/sshd_config'), '# sandbox guest sshd_config\nInclude /etc/ssh/sshd_config.d/*.conf\n#PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\nX11Forwarding yes\nPrintMotd no\nAcceptEnv LANG LC_*\nSubsystem\tsftp\t/usr/lib/openssh/sftp-server\n');
  fs.mkdirSync(etc('ssh/sshd_config.d'), { recursive: true });
  write(etc('cloud/cloud.cfg'), 'disable_root: true\npreserve_hostname: false\n');
  write(etc('default/locale'), '');
  if (os.id === 'rocky') {
    write(etc('selinux/config'), 'SELINUX=enforcing\nSELINUXTYPE=targeted\n');
    write(etc('yum.repos.d/rocky.repo'), '[baseos]\nname=Rocky Linux $releasever - BaseOS\nmirrorlist=https://mirrors.rockylinux.org/mirrorlist?arch=$basearch&repo=BaseOS-$releasever\ngpgcheck=1\nenabled=1\n');
    write(etc('dnf/dnf.conf'), '[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\n');
  } else {
    write(etc('locale.gen'), '# en_US.UTF-8 UTF-8\n');
    const code = /VERSION_CODENAME=(\w+)/.exec(osRelease(os))![1];
    const mirror = os.id === 'ubuntu' ? 'http://archive.ubuntu.com/ubuntu' : 'http://deb.debian.org/debian';
    write(etc('apt/sources.list'), `deb ${mirror} ${code} main\ndeb ${mirror} ${code}-updates main\n`);
    fs.mkdirSync(etc('apt/sources.list.d'), { recursive: true });
    fs.mkdirSync(etc('apt/apt.conf.d'), { recursive: true });
  }
}

/** Writes (or refreshes) the guest root for this boot; returns the users' uids. */
export function prepareGuestRoot(
  root: string,
  os: GuestOs,
  ci: CloudInit | undefined,
  opts: { packageOutputLines?: number; packageSilenceMs?: number; packageExitCode?: number; cloudInitStatus?: 'error' } = {},
): Record<string, number> {
  if (!fs.existsSync(path.join(root, 'etc', 'os-release'))) seed(root, os);
  const etc = (f: string) => path.join(root, 'etc', f);

  // Shims are rewritten at every boot, so an updated sandbox applies to old guests.
  for (const [tool, def] of Object.entries(SHIMS)) write(path.join(root, 'usr/local', def.dir, tool), shimScript(tool, def, { outputLines: opts.packageOutputLines, silenceMs: opts.packageSilenceMs, exitCode: opts.packageExitCode, cloudInitStatus: opts.cloudInitStatus }), 0o755);
  write(path.join(root, 'usr/local/bin/sudo'), sudoScript(), 0o755);

  const users = ci?.users ?? [];
  const uids: Record<string, number> = { root: 0 };
  users.forEach((u, i) => (uids[u] = 1000 + i));
  const sudoGroup = os.id === 'rocky' ? 'wheel' : 'sudo';
  const passwd = ['root:x:0:0:root:/root:/bin/bash', 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin'];
  const group = ['root:x:0:', `${sudoGroup}:x:27:${users.join(',')}`, 'nogroup:x:65534:'];
  const shadow = ['root:*:20000:0:99999:7:::', 'nobody:*:20000:0:99999:7:::'];
  for (const u of users) {
    passwd.push(`${u}:x:${uids[u]}:${uids[u]}::/home/${u}:/bin/bash`);
    group.push(`${u}:x:${uids[u]}:`);
    shadow.push(`${u}:${ci?.passwordHash ?? '!'}:20000:0:99999:7:::`);
    const home = path.join(root, 'home', u);
    fs.mkdirSync(path.join(home, '.ssh'), { recursive: true });
    fs.chownSync(home, uids[u], uids[u]);
    fs.chmodSync(home, 0o750);
    fs.chownSync(path.join(home, '.ssh'), uids[u], uids[u]);
    fs.chmodSync(path.join(home, '.ssh'), 0o700);
    // cloud-init appends the configured keys to whatever the user already has.
    const ak = path.join(home, '.ssh', 'authorized_keys');
    const have = fs.existsSync(ak) ? fs.readFileSync(ak, 'utf8') : '';
    const missing = (ci?.keys ?? []).filter((k) => !have.includes(k));
    write(ak, have + missing.map((k) => k + '\n').join(''), 0o600, uids[u]);
  }
  write(etc('passwd'), passwd.join('\n') + '\n');
  write(etc('group'), group.join('\n') + '\n');
  write(etc('shadow'), shadow.join('\n') + '\n', 0o640);
  if (users.length) write(etc('sudoers.d/90-cloud-init-users'), users.map((u) => `${u} ALL=(ALL) NOPASSWD:ALL`).join('\n') + '\n', 0o440);
  if (ci) {
    write(etc('hostname'), ci.hostname + '\n');
    write(etc('hosts'), `127.0.0.1 localhost\n127.0.1.1 ${ci.hostname}\n::1 localhost ip6-localhost ip6-loopback\n`);
  }
  writeIfAbsent(path.join(root, 'var/log/cloud-init.log'), '');
  return uids;
}
