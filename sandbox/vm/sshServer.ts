import fs from 'node:fs';
import path from 'node:path';
import { timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { Server, utils, type Connection, type ServerChannel } from 'ssh2';
import { spawnInJail, userPath, type JailUser } from './jail';

/**
 * The guest's sshd: real SSH (ssh2) on the VM's address. Public-key authentication only,
 * against `~/.ssh/authorized_keys` in the guest root (what cloud-init wrote, or what a
 * script changed since). Exec requests and shells run in the VM's jail with their
 * output streamed live; the exit status is returned.
 */
export interface GuestSshOptions {
  host: string;
  port: number;
  hostKey: string;
  root: string;
  hostname: string;
  privilegedLog: string;
  log(msg: string): void;
}

function lookupUser(root: string, name: string): JailUser | undefined {
  let passwd = '';
  try {
    passwd = fs.readFileSync(path.join(root, 'etc/passwd'), 'utf8');
  } catch {
    return undefined;
  }
  for (const line of passwd.split('\n')) {
    const f = line.split(':');
    if (f[0] === name && f.length >= 7) return { name, uid: Number(f[2]), home: f[5] };
  }
  return undefined;
}

/** The authorized_keys entry matching `key`, with its options (e.g. command="..."). */
function authorizedEntry(root: string, user: JailUser, algo: string, data: Buffer): { command?: string } | undefined {
  let text = '';
  try {
    text = fs.readFileSync(path.join(root, user.home, '.ssh/authorized_keys'), 'utf8');
  } catch {
    return undefined;
  }
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:(.*?)\s+)?((?:ssh|ecdsa|sk)-[\w@.\-]+\s+[A-Za-z0-9+/=]+)(?:\s.*)?$/.exec(line);
    if (!m) continue;
    const parsed = utils.parseKey(m[2]);
    if (parsed instanceof Error) continue;
    const pub = (Array.isArray(parsed) ? parsed[0] : parsed).getPublicSSH();
    if (pub.length === data.length && timingSafeEqual(pub, data)) {
      const cmd = /command="((?:[^"\\]|\\.)*)"/.exec(m[1] ?? '');
      return { command: cmd?.[1].replace(/\\"/g, '"') };
    }
    void algo;
  }
  return undefined;
}

function runSession(o: GuestSshOptions, conn: Connection, user: JailUser, forced: string | undefined, remote: string): void {
  conn.on('session', (acceptSession) => {
    const session = acceptSession();
    const env: Record<string, string> = {};
    session.on('env', (accept, _reject, info) => {
      if (/^(LANG|LC_\w+|TERM)$/.test(info.key)) env[info.key] = info.val;
      accept?.();
    });
    session.on('pty', (accept) => accept?.());
    session.on('window-change', (accept) => accept?.());
    const start = (channel: ServerChannel, argv: string[]) => {
      const child = spawnInJail({
        root: o.root,
        hostname: o.hostname,
        privilegedLog: o.privilegedLog,
        user,
        argv,
        env: {
          ...env,
          HOME: user.home,
          USER: user.name,
          LOGNAME: user.name,
          SHELL: '/bin/bash',
          PATH: userPath(user.uid),
          LANG: env.LANG ?? 'C.UTF-8',
          SSH_CONNECTION: `${remote} ${o.host} ${o.port}`,
          SSH_CLIENT: `${remote} ${o.port}`,
        },
      });
      child.stdout!.pipe(channel, { end: false });
      child.stderr!.pipe(channel.stderr, { end: false });
      channel.pipe(child.stdin!);
      child.stdin!.on('error', () => undefined); // the command may exit before reading its input
      let stdoutDone = false;
      let stderrDone = false;
      let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
      const finish = () => {
        if (!stdoutDone || !stderrDone || !exit) return;
        if (exit.signal) channel.exit(exit.signal.replace(/^SIG/, ''), false, '');
        else channel.exit(exit.code ?? 255);
        channel.end();
      };
      child.stdout!.on('end', () => ((stdoutDone = true), finish()));
      child.stderr!.on('end', () => ((stderrDone = true), finish()));
      child.on('exit', (code, signal) => ((exit = { code, signal }), finish()));
      child.on('error', (err) => {
        channel.stderr.write(`sandbox: cannot start the guest command: ${err.message}\n`);
        channel.exit(255);
        channel.end();
      });
      // The client went away: take the command down with the channel, as sshd does.
      channel.on('close', () => {
        if (!exit) child.kill('SIGKILL');
      });
    };
    session.on('exec', (accept, _reject, info) => {
      o.log(`exec as ${user.name}: ${info.command}`);
      start(accept(), ['/bin/bash', '-c', forced ?? info.command]);
    });
    session.on('shell', (accept) => start(accept(), forced ? ['/bin/bash', '-c', forced] : ['/bin/bash', '-l']));
    session.on('subsystem', (_accept, reject) => reject?.());
  });
}

export function startGuestSsh(o: GuestSshOptions): Promise<net.Server> {
  const server = new Server({ hostKeys: [o.hostKey], ident: 'OpenSSH_9.2p1 Debian-2+deb12u3' }, (conn, info) => {
    let user: JailUser | undefined;
    let forced: string | undefined;
    conn.on('authentication', (ctx) => {
      const u = lookupUser(o.root, ctx.username);
      if (ctx.method !== 'publickey' || !u) return ctx.reject(['publickey']);
      const entry = authorizedEntry(o.root, u, ctx.key.algo, ctx.key.data);
      if (!entry) return ctx.reject(['publickey']);
      if (!ctx.signature) return ctx.accept(); // the client asks whether this key would do
      const parsed = utils.parseKey(`${ctx.key.algo} ${ctx.key.data.toString('base64')}`);
      const key = parsed instanceof Error ? undefined : Array.isArray(parsed) ? parsed[0] : parsed;
      if (key && ctx.blob && key.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true) {
        user = u;
        forced = entry.command;
        o.log(`accepted publickey for ${u.name} from ${info.ip}`);
        return ctx.accept();
      }
      return ctx.reject(['publickey']);
    });
    conn.on('ready', () => runSession(o, conn, user!, forced, `${info.ip} ${info.port}`));
    conn.on('error', (err) => o.log(`connection error: ${err.message}`));
  });
  // sshd re-executes itself for each connection and reads its host keys again: once they
  // are removed (the init script's seal), sessions already open go on, and a new one is
  // closed before sshd says a word ("Connection closed by remote host").
  const listener = net.createServer((socket) => {
    if (fs.existsSync(path.join(o.root, 'etc/ssh/ssh_host_ed25519_key.pub'))) return server.injectSocket(socket);
    o.log(`sshd: no hostkeys available -- exiting. (connection from ${socket.remoteAddress})`);
    socket.destroy();
  });
  return new Promise((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(o.port, o.host, () => {
      listener.off('error', reject);
      resolve(listener);
    });
  });
}
