import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promises as fs, constants as fsConstants } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { SandboxSetupError } from './setupError';
import { lowerPriority } from './priority';

/*
 * A real OpenSSH server standing in for one Proxmox node's management SSH. The sandbox
 * cluster gives every fake node its own sshd on a loopback address, so the service talks to
 * "other nodes" exactly as in production: root, key only, commands through a login shell.
 */

export interface NodeSshd {
  host: string;
  port: number;
  /** The listener's pid, for the service's run records. */
  pid: number;
  stop(): Promise<void>;
}

export interface NodeSshdOptions {
  node: string;
  /** Loopback address to listen on. */
  host: string;
  port: number;
  /** Host keys, sshd_config, authorized_keys, pid and log live here. */
  stateDir: string;
  /** OpenSSH public key lines allowed to log in as root. */
  authorizedKeys: string[];
  /** Set for every session (SetEnv): PATH with the sandbox bin dir first, PVE_SANDBOX_*. */
  env: Record<string, string>;
  /** Default /usr/sbin/sshd; sandbox/requirements finds it. */
  sshdPath?: string;
}

const DEFAULT_SSHD = '/usr/sbin/sshd';
const SSH_KEYGEN = 'ssh-keygen';
/** sshd refuses to start without its privilege-separation directory. */
const PRIVSEP_DIR = '/run/sshd';
const START_TIMEOUT_MS = 10_000;

const execFileAsync = promisify(execFile);

/**
 * Starts `sshd -D` for one node and resolves once its port accepts connections.
 * The host key in stateDir is kept across restarts, as a real node keeps its own. stop()
 * kills sshd and every session it forked, dropping open connections like a reboot would.
 */
export async function startNodeSshd(opts: NodeSshdOptions): Promise<NodeSshd> {
  // Otherwise a leftover listener would answer the readiness probe for an sshd that
  // failed to bind.
  if (await canConnect(opts.host, opts.port)) throw new Error(`${opts.host}:${opts.port} is already in use`);
  // spawn() reports a missing program as an 'error' event, which would crash the caller.
  const sshd = opts.sshdPath ?? DEFAULT_SSHD;
  if (!(await isExecutable(sshd))) {
    throw new SandboxSetupError(`${sshd} is missing: the sandbox's nodes need OpenSSH's server (apt-get install openssh-server)`);
  }
  const stateDir = path.resolve(opts.stateDir);
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  await fs.chmod(stateDir, 0o700);
  await fs.mkdir(PRIVSEP_DIR, { recursive: true, mode: 0o755 });

  const hostKey = path.join(stateDir, 'ssh_host_ed25519_key');
  // Reuse the host key across restarts: clients remember it, and a changed key is refused.
  if (!(await exists(hostKey))) {
    await execFileAsync(SSH_KEYGEN, ['-q', '-t', 'ed25519', '-N', '', '-C', `sandbox-${opts.node}`, '-f', hostKey]);
  }

  const authorizedKeys = path.join(stateDir, 'authorized_keys');
  await fs.writeFile(authorizedKeys, opts.authorizedKeys.map((k) => k.trim()).join('\n') + '\n', { mode: 0o600 });
  await fs.chmod(authorizedKeys, 0o600);

  const configPath = path.join(stateDir, 'sshd_config');
  const pidFile = path.join(stateDir, 'sshd.pid');
  const logFile = path.join(stateDir, 'sshd.log');
  const strictModes = await isSecurePath(authorizedKeys);
  await fs.writeFile(
    configPath,
    sshdConfig({ ...opts, hostKey, authorizedKeysFile: authorizedKeys, pidFile, strictModes }),
    { mode: 0o600 },
  );

  // -D: stay in the foreground so this process owns it; -E: log to a file in stateDir.
  const child = spawn(sshd, ['-D', '-f', configPath, '-E', logFile], { stdio: 'ignore' });
  lowerPriority(child.pid);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A test run that dies without stop() must not leave the port taken.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.removeListener('exit', killOnExit));
  try {
    await waitForPort(opts.host, opts.port, child);
  } catch (err) {
    child.kill('SIGKILL');
    const log = await fs.readFile(logFile, 'utf8').catch(() => '');
    throw new Error(`sshd for node '${opts.node}' did not start: ${(err as Error).message}\n${log.slice(-2000)}`);
  }

  return {
    host: opts.host,
    port: opts.port,
    pid: child.pid!,
    async stop() {
      await stopTree(child, exited);
    },
  };
}

function sshdConfig(
  o: NodeSshdOptions & { hostKey: string; authorizedKeysFile: string; pidFile: string; strictModes: boolean },
): string {
  // Root's login shell runs every command as `bash -c`, and Debian's bash then sources
  // ~/.bashrc (and /etc/bash.bashrc) when it sees SSH_CLIENT, unless it is a nested shell
  // (SHLVL >= 2). A bashrc that prepends to PATH would hide the sandbox's qm; SHLVL=1
  // makes the session shell count as nested, so it reads no rc file and PATH stays ours.
  const setEnv = Object.entries({ SHLVL: '1', ...o.env }).map(([k, v]) => quoteConfig(`${k}=${v}`));
  return [
    `# sandbox node ${o.node}; written by sandbox/nodeSshd.ts`,
    `ListenAddress ${o.host}:${o.port}`,
    `HostKey ${quoteConfig(o.hostKey)}`,
    `PidFile ${quoteConfig(o.pidFile)}`,
    // AuthorizedKeysFile expands %-tokens, so a literal % in the path must be doubled.
    `AuthorizedKeysFile ${quoteConfig(o.authorizedKeysFile.replace(/%/g, '%%'))}`,
    'PermitRootLogin prohibit-password',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    // StrictModes checks every directory above authorized_keys; a state dir under the
    // world-writable /tmp fails that check, so it is relaxed only in that case (the files
    // themselves are still 0600 in a 0700 directory, on a loopback-only listener).
    `StrictModes ${o.strictModes ? 'yes' : 'no'}`,
    'PrintMotd no',
    'PrintLastLog no',
    'LogLevel VERBOSE',
    // As on a Debian/Proxmox node: images are copied to an off-cluster service's main node.
    'Subsystem sftp internal-sftp',
    ...(setEnv.length > 0 ? [`SetEnv ${setEnv.join(' ')}`] : []),
    '',
  ].join('\n');
}

/** sshd_config tokens are split on spaces; double quotes keep one token together. */
function quoteConfig(value: string): string {
  if (/["\n\r]/.test(value)) throw new Error(`sshd_config value cannot contain quotes or newlines: ${value}`);
  return `"${value}"`;
}

/** Mirrors sshd's StrictModes walk: every parent owned by root and not group/world writable. */
async function isSecurePath(file: string): Promise<boolean> {
  let dir = path.dirname(file);
  for (;;) {
    const st = await fs.stat(dir);
    if (st.uid !== 0 || (st.mode & 0o022) !== 0) return false;
    const parent = path.dirname(dir);
    if (parent === dir) return true;
    dir = parent;
  }
}

async function isExecutable(p: string): Promise<boolean> {
  return fs.access(p, fsConstants.X_OK).then(
    () => true,
    () => false,
  );
}

async function exists(p: string): Promise<boolean> {
  return fs.access(p).then(
    () => true,
    () => false,
  );
}

async function waitForPort(host: string, port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sshd exited (code ${child.exitCode}, signal ${child.signalCode})`);
    }
    if (await canConnect(host, port)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${host}:${port} did not accept connections within ${START_TIMEOUT_MS} ms`);
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Kills sshd and every process it forked. The per-connection children call setsid(), so
 * killing the listener (or its process group) would leave open connections alive; a
 * stopped node must drop them, as a rebooted one would.
 */
async function stopTree(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const pids = [...(await descendants(child.pid)), child.pid];
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const timer = setTimeout(() => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }, 3000);
  await exited;
  clearTimeout(timer);
}

/** Children of `pid`, recursively, read from /proc (Linux). */
async function descendants(pid: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // Field 4 is the parent pid; the command name (field 2) may contain spaces, so split after ')'.
    const m = /\)\s+\S+\s+(\d+)/.exec(stat);
    if (m) parentOf.set(Number(entry), Number(m[1]));
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    for (const [c, pp] of parentOf) {
      if (pp === p) {
        found.push(c);
        queue.push(c);
      }
    }
  }
  return found;
}
