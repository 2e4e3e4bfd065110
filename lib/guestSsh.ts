import { Client as SshClient } from 'ssh2';
import { failure } from '../contract';
import { fingerprint, hostKeyAlgorithms, hostKeyLine, parseHostKey } from './guestHostKey';

export interface GuestTarget {
  host: string;
  port: number;
  username: string;
  privateKey: Buffer;
  /**
   * The only host key accepted (a `.pub` line). Another key fails the connection with a
   * HostKeyMismatchError before anything is sent. Unset: any key.
   */
  hostKey?: string;
  /** Where the pinned key came from, for the mismatch message. */
  hostKeySource?: string;
}

/**
 * SSH to a VM. Anyone on the VM network can answer at a VM's address, so a connection
 * that carries anything of value names the host key it expects (see docs/security.md).
 */
export function connectGuest(target: GuestTarget, timeoutMs = 10_000): Promise<SshClient> {
  const pinned = target.hostKey !== undefined ? parseHostKey(target.hostKey) : undefined;
  return new Promise((resolve, reject) => {
    const conn = new SshClient();
    let settled = false;
    let mismatch: Error | undefined;
    const where = `${target.host}:${target.port}`;
    const expected = pinned ? `${fingerprint(pinned.blob)}${target.hostKeySource ? ` (${target.hostKeySource})` : ''}` : '';
    // ssh2 can emit 'error' more than once for one connection (a forwarded port that
    // accepts and then drops, as QEMU's user network does while the guest's sshd is not
    // up yet, gives a timeout and then "Connection lost before handshake"). An 'error'
    // with no listener would crash the process, so one stays for the connection's life;
    // after the first, a failure shows as the session's channel closing.
    conn.on('error', (err) => {
      if (settled) return;
      settled = true;
      conn.end();
      if (!mismatch && pinned && /host key/i.test(err.message) && (err as { level?: string }).level === 'handshake') {
        // ssh2's words for a server that holds no key of the pinned type.
        mismatch = failure('HostKeyMismatchError', `SSH server at ${where} offers no ${pinned.type} host key; expected ${expected}`);
      }
      reject(mismatch ?? err);
    });
    conn.once('ready', () => {
      settled = true;
      resolve(conn);
    });
    // A server that sends its banner and closes before the key exchange (an sshd left
    // without host keys, as a guest sealed for cloning is until cloud-init makes new ones)
    // makes ssh2 emit 'close' and nothing else: without this the connect would never settle.
    conn.once('close', () => {
      if (settled) return;
      settled = true;
      reject(mismatch ?? new Error(`SSH server at ${where} closed the connection before the handshake`));
    });
    conn.connect({
      host: target.host,
      port: target.port,
      username: target.username,
      privateKey: target.privateKey,
      readyTimeout: timeoutMs,
      ...(pinned ? { algorithms: { serverHostKey: hostKeyAlgorithms(pinned) as never } } : {}),
      // ssh2 calls this with the raw key blob, then checks the server's signature over the
      // key exchange with that key: a server that shows the pinned key without holding it
      // fails there, still before authentication.
      hostVerifier: (blob: Buffer) => {
        if (!pinned || blob.equals(pinned.blob)) return true;
        mismatch = failure(
          'HostKeyMismatchError',
          `SSH server at ${where} presented host key ${fingerprint(blob)}, not the VM's ${expected}: refusing to talk to it`,
        );
        return false;
      },
    });
  });
}

/**
 * The host key the SSH server at `host:port` presents, learnt by a handshake that stops
 * before authentication: the server learns nothing of who asks. Not yet proof that the
 * server holds the key; a connection pinned to it checks that.
 */
export function peekHostKey(target: Pick<GuestTarget, 'host' | 'port'>, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const conn = new SshClient();
    let seen: string | undefined;
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      conn.end();
      if (seen) resolve(seen);
      else reject(err ?? new Error(`SSH at ${target.host}:${target.port} closed before its host key`));
    };
    conn.on('error', settle);
    conn.on('close', () => settle());
    conn.connect({
      host: target.host,
      port: target.port,
      username: 'none',
      readyTimeout: timeoutMs,
      hostVerifier: (blob: Buffer) => {
        seen = hostKeyLine({ type: blobType(blob), blob });
        return false;
      },
    });
  });
}

/** The key type a wire blob names first (string length, then the name). */
function blobType(blob: Buffer): string {
  return blob.subarray(4, 4 + blob.readUInt32BE(0)).toString('latin1');
}

export interface GuestExecOptions {
  stdin?: string;
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  signal?: AbortSignal;
}

/** Runs one command on the guest, streaming its output by line; resolves to the exit code. */
export function execOnGuest(conn: SshClient, command: string, opts: GuestExecOptions = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    conn.exec(command, (err, channel) => {
      if (err) return reject(err);
      const partial = { stdout: '', stderr: '' };
      const feed = (stream: 'stdout' | 'stderr', chunk: Buffer) => {
        const text = partial[stream] + chunk.toString('utf8');
        const lines = text.split(/\r?\n/);
        partial[stream] = lines.pop() ?? '';
        for (const line of lines) opts.onLine?.(line, stream);
      };
      const onAbort = () => channel.close();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      channel.on('data', (c: Buffer) => feed('stdout', c));
      channel.stderr.on('data', (c: Buffer) => feed('stderr', c));
      let code: number | null = null;
      channel.on('exit', (c: number | null) => (code = c));
      channel.on('close', () => {
        opts.signal?.removeEventListener('abort', onAbort);
        for (const s of ['stdout', 'stderr'] as const) if (partial[s]) opts.onLine?.(partial[s], s);
        if (opts.signal?.aborted) reject(new Error('aborted'));
        else resolve(code ?? 255);
      });
      if (opts.stdin !== undefined) channel.end(opts.stdin);
      else channel.end();
    });
  });
}
