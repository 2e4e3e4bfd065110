import { constants } from 'node:os';
import type { Spawner } from './spawner';
import {
  ExecutorTimeoutError,
  ExecutorUnreachableError,
  OutputCollector,
  abortReason,
  displayCommand,
  type CommandResult,
  type NodeExecutor,
  type RunOptions,
} from './types';

export interface LocalExecutorOptions {
  /** Starts the commands: one per process, made where the process is put together. */
  spawner: Spawner;
  /**
   * Merged over this process's environment (as it was at the first local command, when
   * the spawner started) for every command. The sandbox uses it to put its bin dir (fake
   * qm, pvesh, pvesm) first on PATH for the main node.
   */
  env?: Record<string, string>;
}

/**
 * Runs commands on this machine, for the main node when the service runs on it. The argv
 * goes straight to execve: no shell ever sees it, so no element can be interpreted.
 */
export class LocalExecutor implements NodeExecutor {
  constructor(
    readonly node: string,
    private readonly options: LocalExecutorOptions,
  ) {}

  async run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    if (argv.length === 0) throw new Error('empty argv');
    opts.signal?.throwIfAborted();
    const stdout = new OutputCollector('stdout', opts.onLine);
    const stderr = new OutputCollector('stderr', opts.onLine);

    // Started by the spawner process, not forked from this one (spawnerProcess.ts says why).
    const child = this.options.spawner.run(argv[0], argv.slice(1), {
      env: this.options.env,
      stdin: opts.stdin,
      onData: (fd, chunk) => (fd === 1 ? stdout : stderr).push(chunk),
    });

    // An abort or timeout settles at once: output pipes may stay open in grandchildren.
    let stopped: ((why: unknown) => void) | undefined;
    const stoppedEarly = new Promise<never>((_, reject) => (stopped = reject));
    const stop = (why: unknown) => {
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 2000).unref();
      void child.exited.finally(() => clearTimeout(force)).catch(() => undefined);
      stopped?.(why);
    };
    const onAbort = () => stop(abortReason(opts.signal));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => stop(new ExecutorTimeoutError(this.node, displayCommand(argv), opts.timeoutMs!)), opts.timeoutMs);
    let result: Awaited<typeof child.exited>;
    try {
      result = await Promise.race([child.exited, stoppedEarly]);
    } catch (err) {
      // The spawner died under the command: like a dropped SSH connection, worth a retry.
      if (err instanceof Error && !(err instanceof ExecutorTimeoutError) && !opts.signal?.aborted) throw new ExecutorUnreachableError(this.node, err.message, { cause: err });
      throw err;
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      clearTimeout(timer);
    }
    const out = { stdout: stdout.end(), stderr: stderr.end() };

    // The program could not be started (not found, not executable). A shell reports the
    // same situation as exit 127 or 126; do so too, so both executors agree.
    if (result.error) {
      const notFound = result.error.code === 'ENOENT';
      return { stdout: out.stdout, stderr: `${out.stderr}${argv[0]}: ${notFound ? 'not found' : result.error.message}\n`, exitCode: notFound ? 127 : 126 };
    }
    if (typeof result.code === 'number') return { ...out, exitCode: result.code };
    return { ...out, exitCode: 128 + (result.signal ? (constants.signals[result.signal] ?? 0) : 0) };
  }

  async close(): Promise<void> {
    // Nothing is pooled locally.
  }
}
