import { promises as fs } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client, type ClientChannel, type SFTPWrapper } from 'ssh2';
import { shellCommand } from './quote';
import { keyBlobType } from '../sshKey';
import {
  ExecutorTimeoutError,
  ExecutorUnreachableError,
  OutputCollector,
  abortReason,
  displayCommand,
  type CommandResult,
  type NodeExecutor,
  type PutFileOptions,
  type RunOptions,
} from './types';

/** Prefix of the line in which the remote shell reports its pid (see `run`). */
const PID_LINE = 'QEMURUN_PID=';

export interface SshExecutorOptions {
  node: string;
  host: string;
  port?: number;
  username?: string;
  /** Private key file (OpenSSH format); read on every (re)connect, so it can be rotated. */
  privateKeyPath: string;
  /** Holds `known_hosts`: the first key a node presents is remembered, a changed key refused. */
  knownHostsDir: string;
  connectTimeoutMs?: number;
  /**
   * Channels open at once on the one connection. OpenSSH's MaxSessions (default 10) caps
   * sessions per connection; further commands wait for a free channel.
   */
  maxChannels?: number;
}

interface Connection {
  client: Client;
  /** Set once the connection has closed; the pool then opens a new one. */
  dead: boolean;
  /** Fails every command still running when the connection drops. */
  onDrop: Set<(err: Error) => void>;
}

/**
 * Runs commands on a node over one pooled SSH connection: concurrent commands share it as
 * separate channels, and a dropped connection is reopened by the next command. The remote
 * login shell gets one command line in which every argv element is single-quoted.
 */
export class SshExecutor implements NodeExecutor {
  readonly node: string;
  /** The pooled connection: `conn` is set once `promise` resolves. */
  private pool?: { promise: Promise<Connection>; conn?: Connection };
  private openChannels = 0;
  private readonly waiting: Array<() => void> = [];
  private closed = false;

  constructor(private readonly options: SshExecutorOptions) {
    this.node = options.node;
  }

  async run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    // The shell reports its pid (sshd made it a process-group leader), then becomes the
    // command. Aborting kills that process group through a second channel: OpenSSH refuses
    // "signal" requests on root sessions, and closing a channel kills nothing.
    const command = `printf '${PID_LINE}%s\\n' "$$" >&2; exec ${shellCommand(argv)}`;
    opts.signal?.throwIfAborted();
    await this.acquireChannel(opts.signal);
    let opened: { conn: Connection; channel: ClientChannel };
    try {
      opened = await this.openExec(command);
    } catch (err) {
      this.releaseChannel();
      throw err;
    }
    return this.drive(opened.conn, opened.channel, argv, opts);
  }

  async putFile(localPath: string, remotePath: string, opts: PutFileOptions = {}): Promise<void> {
    opts.signal?.throwIfAborted();
    await this.acquireChannel(opts.signal);
    try {
      const conn = await this.connection();
      const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
        conn.client.sftp((err, s) => (err ? reject(new ExecutorUnreachableError(this.node, `sftp: ${err.message}`, { cause: err })) : resolve(s))),
      );
      const onAbort = () => sftp.end();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        // A name of its own per copy: two workers staging the same image at once must not
        // write into one file; each renames a complete copy into place.
        const part = `${remotePath}.${randomBytes(6).toString('hex')}.part`;
        try {
          await new Promise<void>((resolve, reject) =>
            sftp.fastPut(localPath, part, { mode: 0o600, step: (sent, _chunk, total) => opts.onProgress?.(sent, total) }, (err) =>
              err ? reject(err) : resolve(),
            ),
          );
          // posix-rename replaces an existing file, like mv; plain SFTP rename refuses to.
          await new Promise<void>((resolve, reject) => sftp.ext_openssh_rename(part, remotePath, (err) => (err ? reject(err) : resolve())));
        } catch (err) {
          await new Promise<void>((resolve) => sftp.unlink(part, () => resolve()));
          throw err;
        }
      } finally {
        opts.signal?.removeEventListener('abort', onAbort);
        sftp.end();
      }
      opts.signal?.throwIfAborted();
    } finally {
      this.releaseChannel();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const pending = this.pool?.promise;
    this.pool = undefined;
    const conn = await pending?.catch(() => undefined);
    if (!conn) return;
    await new Promise<void>((resolve) => {
      conn.client.once('close', () => resolve());
      conn.client.end();
    });
  }

  /**
   * Opens an exec channel; the command has not started if this fails, so retrying is safe.
   * A refused channel (the server's session limit, briefly exceeded while it reaps finished
   * sessions) is retried on the same connection; a dead connection is replaced once.
   */
  private async openExec(command: string): Promise<{ conn: Connection; channel: ClientChannel }> {
    let reconnected = false;
    for (let attempt = 1; ; attempt++) {
      const conn = await this.connection();
      try {
        const channel = await new Promise<ClientChannel>((resolve, reject) =>
          conn.client.exec(command, (err, ch) => (err ? reject(err) : resolve(ch))),
        );
        return { conn, channel };
      } catch (err) {
        const refused = typeof (err as { reason?: unknown }).reason === 'number';
        if (refused && attempt < 20) {
          await new Promise((r) => setTimeout(r, 25 * attempt));
          continue;
        }
        if (conn.dead && !reconnected) {
          reconnected = true;
          this.forget(conn);
          continue;
        }
        throw new ExecutorUnreachableError(this.node, `cannot open a channel: ${(err as Error).message}`, { cause: err });
      }
    }
  }

  /**
   * Feeds stdin, collects output and settles with the exit code. An abort or timeout
   * settles at once; the channel slot is only given back when the server has closed the
   * channel, because until then the session still counts against its MaxSessions.
   */
  private drive(conn: Connection, channel: ClientChannel, argv: readonly string[], opts: RunOptions): Promise<CommandResult> {
    const stdout = new OutputCollector('stdout', opts.onLine);
    const stderr = new OutputCollector('stderr', opts.onLine);
    return new Promise<CommandResult>((resolve, reject) => {
      let exitCode: number | undefined;
      let remotePid: number | undefined;
      let settled = false;
      let released = false;
      let timer: NodeJS.Timeout | undefined;

      const finish = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const release = () => {
        if (released) return;
        released = true;
        conn.onDrop.delete(onDrop);
        this.releaseChannel();
      };
      const stop = (why: unknown) => {
        finish(() => reject(why));
        if (remotePid !== undefined) this.killRemote(remotePid);
        channel.close();
      };
      const onAbort = () => stop(abortReason(opts.signal));
      const onDrop = (err: Error) => {
        finish(() => reject(err));
        release();
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      conn.onDrop.add(onDrop);
      if (opts.timeoutMs !== undefined) {
        const ms = opts.timeoutMs;
        timer = setTimeout(() => stop(new ExecutorTimeoutError(this.node, displayCommand(argv), ms)), ms);
      }

      channel.on('data', (chunk: Buffer) => stdout.push(chunk));
      // The first stderr line is the pid line written by the wrapper; it is not output.
      let head: Buffer | undefined = Buffer.alloc(0);
      channel.stderr.on('data', (chunk: Buffer) => {
        if (head === undefined) return stderr.push(chunk);
        head = Buffer.concat([head, chunk]);
        const nl = head.indexOf(10);
        if (nl < 0) return;
        const m = new RegExp(`^${PID_LINE}(\\d+)$`).exec(head.subarray(0, nl).toString('latin1'));
        if (m) remotePid = Number(m[1]);
        const rest = m ? head.subarray(nl + 1) : head;
        head = undefined;
        if (rest.length > 0) stderr.push(rest);
      });
      // ssh2 passes the exit status to 'close' as well. 'exit' alone is not enough: a fast
      // command's status can arrive in the same packet batch as the exec reply, before
      // these listeners exist. A process killed by a signal is reported by name; shells
      // report 128 + its number.
      channel.on('close', (code?: number | null, signal?: string) => {
        if (code !== undefined) exitCode = code ?? 128 + (signal ? signalNumber(signal) : 0);
        release();
        if (head !== undefined && head.length > 0) stderr.push(head);
        const out = { stdout: stdout.end(), stderr: stderr.end() };
        finish(() => {
          if (exitCode === undefined) reject(new ExecutorUnreachableError(this.node, 'channel closed before the command exited'));
          else resolve({ ...out, exitCode });
        });
      });

      if (opts.stdin !== undefined) channel.end(opts.stdin);
      else channel.end();
    });
  }

  /** Best effort: SIGTERM to the process group of an aborted command. */
  private killRemote(pid: number): void {
    void this.connection()
      .then((conn) =>
        conn.client.exec(`kill -TERM -${pid} 2>/dev/null || kill -TERM ${pid} 2>/dev/null`, (err, ch) => {
          if (err) return;
          ch.resume();
          ch.stderr.resume();
          ch.end();
        }),
      )
      .catch(() => undefined);
  }

  /** The pooled connection, opening it when there is none. */
  private connection(): Promise<Connection> {
    if (this.closed) return Promise.reject(new ExecutorUnreachableError(this.node, 'executor closed'));
    if (!this.pool) {
      const entry: { promise: Promise<Connection>; conn?: Connection } = { promise: this.connect() };
      this.pool = entry;
      // Registered before any caller sees the promise, so `conn` is set before they resume.
      // A failed attempt is not cached: the next command tries again.
      entry.promise.then(
        (c) => (entry.conn = c),
        () => this.pool === entry && (this.pool = undefined),
      );
    }
    return this.pool.promise;
  }

  /** Drops a connection from the pool, so the next command opens a fresh one. */
  private forget(conn: Connection): void {
    if (this.pool?.conn === conn) this.pool = undefined;
    conn.client.end();
  }

  private async connect(): Promise<Connection> {
    const o = this.options;
    let privateKey: Buffer;
    try {
      privateKey = await fs.readFile(o.privateKeyPath);
    } catch (err) {
      throw new ExecutorUnreachableError(this.node, `cannot read private key ${o.privateKeyPath}: ${(err as Error).message}`, { cause: err });
    }
    const client = new Client();
    const conn: Connection = { client, dead: false, onDrop: new Set() };
    const port = o.port ?? 22;
    let hostKeyProblem: Error | undefined;

    // ssh2 may emit more than one 'error'; an unhandled one would crash the worker.
    client.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      const onClose = () => fail(new Error('connection closed during the handshake'));
      const fail = (err: Error) => {
        client.removeListener('error', fail);
        client.removeListener('close', onClose);
        reject(new ExecutorUnreachableError(this.node, `${o.host}:${port}: ${(hostKeyProblem ?? err).message}`, { cause: hostKeyProblem ?? err }));
        client.end();
      };
      client.once('ready', () => {
        client.removeListener('error', fail);
        client.removeListener('close', onClose);
        resolve();
      });
      client.on('error', fail);
      client.once('close', onClose);
      client.connect({
        host: o.host,
        port,
        username: o.username ?? 'root',
        privateKey,
        readyTimeout: o.connectTimeoutMs ?? 15_000,
        // Notice a silently dead peer (node rebooted, network gone) within ~45 s.
        keepaliveInterval: 15_000,
        keepaliveCountMax: 3,
        hostVerifier: (key: Buffer, verify: (ok: boolean) => void) => {
          checkHostKey(path.join(o.knownHostsDir, 'known_hosts'), this.node, hostPattern(o.host, port), key).then(
            () => verify(true),
            (err: Error) => {
              hostKeyProblem = err;
              verify(false);
            },
          );
        },
      });
    });

    const dropped = () => {
      conn.dead = true;
      if (this.pool?.conn === conn) this.pool = undefined;
      const err = new ExecutorUnreachableError(this.node, 'connection lost while the command was running');
      for (const cb of conn.onDrop) cb(err);
    };
    // After 'ready', an error (e.g. keepalive timeout) is followed by 'close'.
    client.on('close', dropped);
    return conn;
  }

  private async acquireChannel(signal?: AbortSignal): Promise<void> {
    const max = this.options.maxChannels ?? 8;
    if (this.openChannels < max) {
      this.openChannels++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(abortReason(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(grant);
    });
    // The releasing command handed its slot over without decrementing.
  }

  private releaseChannel(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.openChannels--;
  }
}

/** How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22. */
function hostPattern(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

// eslint-disable-next-line no-restricted-syntax -- known_hosts is a file of the process, whichever executor writes it
const knownHostsLocks = new Map<string, Promise<unknown>>();

/**
 * Trust on first use, per node: a node with no remembered key gets its key appended
 * (OpenSSH format, `<node>,<host> <type> <base64>`); a node whose key differs is refused.
 * A line an operator added for the address alone (ssh-keyscan) counts as well. Writes are
 * serialised per file, since all executors share it.
 */
async function checkHostKey(file: string, node: string, host: string, key: Buffer): Promise<void> {
  const previous = knownHostsLocks.get(file) ?? Promise.resolve();
  const task = previous.catch(() => undefined).then(async () => {
    const type = keyBlobType(key);
    if (!type) throw new ExecutorUnreachableError(node, `host ${host} offered a malformed host key`);
    const blob = key.toString('base64');
    const text = await fs.readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return '';
      throw err;
    });
    for (const line of text.split('\n')) {
      const [hosts, lineType, lineBlob] = line.trim().split(/\s+/);
      if (!hosts || hosts.startsWith('#')) continue;
      const names = hosts.split(',');
      if (!names.includes(node) && !names.includes(host)) continue;
      if (lineType === type && lineBlob === blob) return;
      throw new Error(
        `host key for node '${node}' changed (${type}); refusing to connect. If the node was ` +
          `reinstalled, remove its line from ${file}`,
      );
    }
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await fs.appendFile(file, `${node},${host} ${type} ${blob}\n`, { mode: 0o600 });
  });
  knownHostsLocks.set(file, task);
  await task;
}

const SIGNALS: Record<string, number> = { HUP: 1, INT: 2, QUIT: 3, ABRT: 6, KILL: 9, USR1: 10, SEGV: 11, USR2: 12, PIPE: 13, ALRM: 14, TERM: 15 };

function signalNumber(name: string): number {
  return SIGNALS[name.replace(/^SIG/, '')] ?? 0;
}
