import { Client as SshClient } from 'ssh2';

export interface GuestTarget {
  host: string;
  port: number;
  username: string;
  privateKey: Buffer;
}

/**
 * SSH to a VM. Host keys are not pinned: every install and rebuild gives the guest a
 * fresh host key, and the address is one the cluster itself just assigned.
 */
export function connectGuest(target: GuestTarget, timeoutMs = 10_000): Promise<SshClient> {
  return new Promise((resolve, reject) => {
    const conn = new SshClient();
    let settled = false;
    // ssh2 can emit 'error' more than once for one connection (a forwarded port that
    // accepts and then drops, as QEMU's user network does while the guest's sshd is not
    // up yet, gives a timeout and then "Connection lost before handshake"). An 'error'
    // with no listener would crash the process, so one stays for the connection's life;
    // after the first, a failure shows as the session's channel closing.
    conn.on('error', (err) => {
      if (settled) return;
      settled = true;
      conn.end();
      reject(err);
    });
    conn.once('ready', () => {
      settled = true;
      resolve(conn);
    });
    conn.connect({
      host: target.host,
      port: target.port,
      username: target.username,
      privateKey: target.privateKey,
      readyTimeout: timeoutMs,
      hostVerifier: () => true,
    });
  });
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
