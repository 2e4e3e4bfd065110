import { constants } from 'node:os';
import { execa } from 'execa';
import {
  ExecutorTimeoutError,
  OutputCollector,
  abortReason,
  displayCommand,
  type CommandResult,
  type NodeExecutor,
  type RunOptions,
} from './types';

export interface LocalExecutorOptions {
  /**
   * Merged over this process's environment for every command. The sandbox uses it to put
   * its bin dir (fake qm, pvesh, pvesm) first on PATH for the main node.
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
    private readonly options: LocalExecutorOptions = {},
  ) {}

  async run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    if (argv.length === 0) throw new Error('empty argv');
    opts.signal?.throwIfAborted();
    const stdout = new OutputCollector('stdout', opts.onLine);
    const stderr = new OutputCollector('stderr', opts.onLine);

    const child = execa(argv[0], argv.slice(1), {
      shell: false,
      env: this.options.env,
      extendEnv: true,
      // Without input the child gets /dev/null, as an SSH command gets EOF: nothing waits.
      ...(opts.stdin === undefined ? { stdin: 'ignore' as const } : { input: opts.stdin }),
      // Output is collected here, line by line, instead of by execa.
      buffer: false,
      reject: false,
      // Its own process group, so that aborting also kills what it started (qemu-img
      // under qm importdisk), as the SSH executor does.
      detached: true,
    });
    child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));

    // An abort or timeout settles at once: output pipes may stay open in grandchildren.
    let stopped: ((why: unknown) => void) | undefined;
    const stoppedEarly = new Promise<never>((_, reject) => (stopped = reject));
    const stop = (why: unknown) => {
      killGroup(child.pid, 'SIGTERM');
      const force = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 2000).unref();
      void child.finally(() => clearTimeout(force));
      stopped?.(why);
    };
    const onAbort = () => stop(abortReason(opts.signal));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => stop(new ExecutorTimeoutError(this.node, displayCommand(argv), opts.timeoutMs!)), opts.timeoutMs);
    let result: Awaited<typeof child>;
    try {
      result = await Promise.race([child, stoppedEarly]);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      clearTimeout(timer);
    }
    const out = { stdout: stdout.end(), stderr: stderr.end() };

    if (typeof result.exitCode === 'number') return { ...out, exitCode: result.exitCode };
    if (result.signal) return { ...out, exitCode: 128 + (constants.signals[result.signal] ?? 0) };
    // The program could not be started (not found, not executable). A shell reports the
    // same situation as exit 127 or 126; do so too, so both executors agree.
    const code = (result as { code?: string }).code;
    return {
      stdout: out.stdout,
      stderr: `${out.stderr}${argv[0]}: ${code === 'ENOENT' ? 'not found' : result.shortMessage}\n`,
      exitCode: code === 'ENOENT' ? 127 : 126,
    };
  }

  async close(): Promise<void> {
    // Nothing is pooled locally.
  }
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}
