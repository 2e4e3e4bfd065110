import fs from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { PRIVILEGED_LOG, SHIMS } from './shims';

/**
 * Runs a guest command in an isolated root made with bubblewrap: the VM's own root
 * directory (writable, persistent), host /usr read-only, fresh /dev, /proc, /run, and
 * private mount, pid, network, IPC and UTS namespaces, so nothing a guest does reaches
 * the host (it has no network but its own loopback).
 *
 * The login user runs with its own uid (so `id -u`, $EUID and file ownership are those of
 * a normal user and the privileged tools refuse it), but keeps a small set of ambient
 * capabilities: bwrap sets no_new_privs, so `sudo` (setpriv back to uid 0) can only keep,
 * never gain, capabilities. The price: a user can write root-owned files without sudo.
 */
const CAPS = ['chown', 'dac_override', 'dac_read_search', 'fowner', 'fsetid', 'kill', 'setgid', 'setuid', 'net_bind_service', 'audit_write'];

export interface JailUser {
  name: string;
  uid: number;
  home: string;
}

export interface JailOptions {
  root: string;
  hostname: string;
  privilegedLog: string;
  user: JailUser;
  env: Record<string, string>;
  /** argv run as the user, e.g. ['/bin/bash', '-c', cmd]. */
  argv: string[];
}

export function userPath(uid: number): string {
  return uid === 0 ? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' : '/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games';
}

function isRegularFile(p: string): boolean {
  try {
    return fs.lstatSync(p).isFile();
  } catch {
    return false;
  }
}

function bwrapArgs(o: JailOptions): string[] {
  const a = ['--bind', o.root, '/', '--ro-bind', '/usr', '/usr', '--bind', `${o.root}/usr/local`, '/usr/local'];
  for (const l of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    // Merged-/usr hosts have links (already in the guest root); others have real directories.
    try {
      if (fs.lstatSync(`/${l}`).isDirectory()) a.push('--ro-bind', `/${l}`, `/${l}`);
    } catch {
      // absent on this host
    }
  }
  // Absolute calls (/usr/sbin/chpasswd) must hit the shims too. Links (reboot ->
  // systemctl) cannot be bind targets; the real binary they reach finds no systemd.
  for (const [tool, def] of Object.entries(SHIMS)) {
    for (const dir of ['/usr/bin', '/usr/sbin']) {
      if (isRegularFile(`${dir}/${tool}`)) a.push('--ro-bind', `${o.root}/usr/local/${def.dir}/${tool}`, `${dir}/${tool}`);
    }
  }
  a.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/run', '--bind', o.privilegedLog, PRIVILEGED_LOG);
  a.push('--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--hostname', o.hostname);
  a.push('--die-with-parent', '--new-session', '--cap-drop', 'ALL');
  for (const c of CAPS) a.push('--cap-add', `CAP_${c.toUpperCase()}`);
  a.push('--chdir', o.user.home);
  const caps = CAPS.map((c) => `+${c}`).join(',');
  a.push('--', 'setpriv', `--reuid=${o.user.uid}`, `--regid=${o.user.uid}`, '--init-groups', `--inh-caps=${caps}`, `--ambient-caps=${caps}`, '--', ...o.argv);
  return a;
}

export function spawnInJail(o: JailOptions): ChildProcess {
  if (!fs.existsSync(o.privilegedLog)) fs.writeFileSync(o.privilegedLog, '', { mode: 0o666 });
  const bwrap = fs.existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : 'bwrap';
  return spawn(bwrap, bwrapArgs(o), { env: o.env, stdio: ['pipe', 'pipe', 'pipe'], cwd: '/' });
}
