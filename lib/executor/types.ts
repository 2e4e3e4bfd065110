/**
 * How a command reaches a Proxmox node. An executor only carries bytes: it knows nothing
 * about qm, pvesh or pvesm (that lives in lib/proxmox).
 */
export interface RunOptions {
  /** Bytes written to the command's stdin, then stdin is closed. Used for secrets. */
  stdin?: string;
  /** Called once per complete output line (without the newline), as it arrives. */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Aborting kills the command (local) or closes the channel (SSH). */
  signal?: AbortSignal;
  /** Kill the command after this many milliseconds. */
  timeoutMs?: number;
}

export interface CommandResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface NodeExecutor {
  /** Proxmox node name, e.g. `pve1`. */
  readonly node: string;
  /**
   * Runs argv[0] with the remaining elements as literal arguments. A non-zero exit is
   * not an error (it is returned in `exitCode`); failing to reach the node is, and the
   * thrown error is an ExecutorUnreachableError.
   */
  run(argv: readonly string[], opts?: RunOptions): Promise<CommandResult>;
  /**
   * Copies a file of this machine to the node (SFTP), atomically: it appears under
   * `remotePath` only once complete. Absent on the local executor: same file system.
   */
  putFile?(localPath: string, remotePath: string, opts?: PutFileOptions): Promise<void>;
  close(): Promise<void>;
}

export interface PutFileOptions {
  onProgress?: (sentBytes: number, totalBytes: number) => void;
  signal?: AbortSignal;
}

/** The node could not be reached at all (connection refused, auth failed, timeout). */
export class ExecutorUnreachableError extends Error {
  override readonly name = 'ExecutorUnreachableError';
  constructor(readonly node: string, message: string, options?: { cause?: unknown }) {
    super(`node '${node}' unreachable: ${message}`, options);
  }
}

/** The command ran longer than `timeoutMs` and was killed (local) or its channel closed (SSH). */
export class ExecutorTimeoutError extends Error {
  override readonly name = 'ExecutorTimeoutError';
  constructor(readonly node: string, readonly command: string, readonly timeoutMs: number) {
    super(`node '${node}': '${command}' timed out after ${timeoutMs} ms`);
  }
}

/**
 * Collects one output stream of a command: decodes UTF-8 across chunk boundaries, keeps the
 * whole text, and reports each complete line to `onLine` as soon as its newline arrives.
 * Shared by both executors so that local and SSH commands report lines identically.
 */
export class OutputCollector {
  private readonly decoder = new TextDecoder('utf-8');
  private text = '';
  private partial = '';

  constructor(
    private readonly stream: 'stdout' | 'stderr',
    private readonly onLine?: RunOptions['onLine'],
  ) {}

  push(chunk: Uint8Array): void {
    this.take(this.decoder.decode(chunk, { stream: true }));
  }

  /** Flushes the decoder and reports a last line that had no newline. Returns the text. */
  end(): string {
    this.take(this.decoder.decode());
    if (this.partial !== '') this.emit(this.partial);
    this.partial = '';
    return this.text;
  }

  private take(s: string): void {
    if (s === '') return;
    this.text += s;
    const lines = (this.partial + s).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) this.emit(line);
  }

  private emit(line: string): void {
    // A CRLF line ending is one line ending; qemu-img progress uses bare \r, which is kept.
    this.onLine?.(line.endsWith('\r') ? line.slice(0, -1) : line, this.stream);
  }
}

/** How a command is shown in errors and logs: its argv, space-joined. */
export function displayCommand(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./<>-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

/** What `run` rejects with when its signal aborts: the signal's own reason, like fetch(). */
export function abortReason(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new DOMException('The operation was aborted', 'AbortError');
}
