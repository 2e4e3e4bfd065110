import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { SpawnReply, SpawnRequest } from './spawnerProcess';

/** How a command started by the spawner ended. */
export interface SpawnedExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The command could not be started (ENOENT, EACCES, ...). */
  error?: { code?: string; message: string };
}

export interface Spawned {
  /** Settles when the command has exited and its output is delivered. */
  exited: Promise<SpawnedExit>;
  /** Signals the command's process group. */
  kill(signal: NodeJS.Signals): void;
}

interface Pending {
  onData: (fd: 1 | 2, data: Uint8Array) => void;
  resolve: (exit: SpawnedExit) => void;
  reject: (err: Error) => void;
}

/**
 * This process's end of the spawner (spawnerProcess.ts, which says why it exists): it
 * forks the spawner at the first command, passes commands to it, and forks a new one if
 * it dies (the commands it was running fail; a retried activity runs them again). The
 * composition root (app/service.ts) makes one and hands it to every local executor.
 */
export class Spawner {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  run(file: string, args: readonly string[], opts: { env?: Record<string, string>; stdin?: string; onData: Pending['onData'] }): Spawned {
    const child = this.started();
    const id = this.nextId++;
    const exited = new Promise<SpawnedExit>((resolve, reject) => this.pending.set(id, { onData: opts.onData, resolve, reject }));
    // While a command runs the channel keeps this process alive, as the command itself would.
    if (this.pending.size === 1) child.channel?.ref();
    this.send(child, { t: 'run', id, file, args: [...args], env: opts.env, stdin: opts.stdin });
    return { exited, kill: (signal) => this.pending.has(id) && this.send(child, { t: 'kill', id, signal }) };
  }

  private send(child: ChildProcess, req: SpawnRequest): void {
    if (child.connected) child.send(req);
  }

  private started(): ChildProcess {
    if (this.child?.connected) return this.child;
    const ts = __filename.endsWith('.ts');
    const child = fork(path.join(__dirname, `spawnerProcess${ts ? '.ts' : '.js'}`), [], {
      // Structured clone: output chunks cross as bytes, not as JSON arrays of numbers.
      serialization: 'advanced',
      // Run from TypeScript (tests, ts-node) it needs a loader; compiled, plain node.
      execArgv: [...(ts ? ['-r', 'ts-node/register/transpile-only'] : []), '--max-semi-space-size=1'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (reply: SpawnReply) => this.received(reply));
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      const why = new Error(`the spawner process exited (${signal ?? code}) while a command ran`);
      for (const p of this.pending.values()) p.reject(why);
      this.pending.clear();
    });
    // Idle, it must not keep this process alive (a CLI, a test run that is over).
    child.unref();
    child.channel?.unref();
    this.child = child;
    return child;
  }

  private received(reply: SpawnReply): void {
    const p = this.pending.get(reply.id);
    if (!p) return;
    if (reply.t === 'out') return p.onData(reply.fd, reply.data);
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.child?.channel?.unref();
    p.resolve({ code: reply.code, signal: reply.signal, ...(reply.error ? { error: reply.error } : {}) });
  }
}
