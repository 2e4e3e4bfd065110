/**
 * The spawner: a small resident Node process that starts the service's local commands
 * for it (lib/executor/spawner.ts is the other end). Creating a process forks its parent,
 * and a fork costs in proportion to the parent's memory and blocks the parent's event
 * loop meanwhile: 3 ms from the idle service, 10–15 ms under load, for each of an
 * install's ~25 `qm` calls. Forked from this process instead, it is cheap, and the
 * service's event loop (the worker, the streams) never waits for it.
 *
 * Messages over the IPC channel, parent to here: `run` and `kill`; here to parent: `out`
 * (a chunk of stdout or stderr) and `exit`. Nothing here knows what a command means.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export type SpawnRequest =
  | { t: 'run'; id: number; file: string; args: string[]; env?: Record<string, string>; stdin?: string }
  | { t: 'kill'; id: number; signal: NodeJS.Signals };

export type SpawnReply =
  | { t: 'out'; id: number; fd: 1 | 2; data: Uint8Array }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null; error?: { code?: string; message: string } };

const children = new Map<number, ChildProcess>();

function send(reply: SpawnReply): void {
  // The service is gone (disconnected): what a command still prints goes nowhere.
  if (process.connected) process.send!(reply);
}

function run(req: Extract<SpawnRequest, { t: 'run' }>): void {
  let child: ChildProcess;
  try {
    child = spawn(req.file, req.args, {
      shell: false,
      env: req.env ? { ...process.env, ...req.env } : process.env,
      // Without input the child gets /dev/null, as an SSH command gets EOF: nothing waits.
      stdio: [req.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      // Its own process group, so that a kill also reaches what it started (qemu-img under
      // qm importdisk), and a command outlives this process as it outlived the service.
      detached: true,
    });
  } catch (err) {
    send({ t: 'exit', id: req.id, code: null, signal: null, error: { code: (err as NodeJS.ErrnoException).code, message: (err as Error).message } });
    return;
  }
  children.set(req.id, child);
  let error: { code?: string; message: string } | undefined;
  child.on('error', (err: NodeJS.ErrnoException) => (error = { code: err.code, message: err.message }));
  child.stdout!.on('data', (data: Buffer) => send({ t: 'out', id: req.id, fd: 1, data }));
  child.stderr!.on('data', (data: Buffer) => send({ t: 'out', id: req.id, fd: 2, data }));
  if (child.stdin) {
    // A command that exits without reading its input closes the pipe: not an error here.
    child.stdin.on('error', () => undefined);
    child.stdin.end(req.stdin);
  }
  child.on('close', (code, signal) => {
    children.delete(req.id);
    send({ t: 'exit', id: req.id, code, signal, ...(error ? { error } : {}) });
  });
}

function kill(req: Extract<SpawnRequest, { t: 'kill' }>): void {
  const pid = children.get(req.id)?.pid;
  if (pid === undefined) return;
  try {
    process.kill(-pid, req.signal);
  } catch {
    // already gone
  }
}

process.on('message', (req: SpawnRequest) => (req.t === 'run' ? run(req) : kill(req)));
// The service exited or crashed: nothing is left to report to. Running commands are in
// their own process groups and finish on their own, as they did before the spawner.
process.on('disconnect', () => process.exit(0));
