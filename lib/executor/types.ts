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
  close(): Promise<void>;
}

/** The node could not be reached at all (connection refused, auth failed, timeout). */
export class ExecutorUnreachableError extends Error {
  override readonly name = 'ExecutorUnreachableError';
  constructor(readonly node: string, message: string, options?: { cause?: unknown }) {
    super(`node '${node}' unreachable: ${message}`, options);
  }
}
