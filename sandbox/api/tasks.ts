import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { clusterPaths } from '../state/paths';
import { readIfExists, readProcFile, sleepSync } from '../state/files';
import { procStartTime } from '../state/runtime';
import { sandboxSourceDir } from '../location';
import { lowerSessionPriority } from '../priority';
import { decodeUpid, encodeUpid, type Upid } from './upid';

/**
 * Worker tasks as PVE's fork_worker runs them: each task is a process of its own (so it
 * carries on when the client that started it, or the API server, goes away), its UPID
 * names that process (pid and start time), and its log is a file under the tasks
 * directory whose last line, once the process has ended, is its exit status:
 * `TASK OK`, `TASK WARNINGS: <n>` or `TASK ERROR: <message>`.
 */

/** What a worker process is asked to do (sandbox/api/worker.ts runs it). */
export interface TaskJob {
  op: 'qm' | 'create' | 'config' | 'resize' | 'template' | 'download';
  /** For `qm`: the qm command line the task amounts to. */
  argv?: string[];
  /** Validated parameters for the other ops. */
  params?: Record<string, string>;
  /** The command an injected fault must match to fire on this task (e.g. `qm migrate 100 pve2`). */
  faultArgv: string[];
  /**
   * A permission the task's own code finds missing (update_vm checks drives once it holds
   * the config, inside the worker): the task fails with it instead of acting.
   */
  denied?: string;
}

export function taskLogFile(dir: string, upid: string): string | undefined {
  const u = decodeUpid(upid);
  return u && path.join(clusterPaths(dir).tasksDir, u.subdir, upid);
}

function spawnWorker(dir: string): ChildProcess {
  const src = sandboxSourceDir();
  const tasksDir = clusterPaths(dir).tasksDir;
  fs.mkdirSync(tasksDir, { recursive: true });
  const errFd = fs.openSync(path.join(tasksDir, 'workers.err'), 'a');
  const child = spawn(process.execPath, [path.join(src, 'tsrun.js'), path.join(src, 'api', 'worker.ts')], {
    // Its own session: the task outlives the request, the API server and its client.
    detached: true,
    stdio: ['pipe', 'ignore', errFd],
    cwd: '/',
    env: { ...process.env, PVE_SANDBOX_DIR: dir },
  });
  fs.closeSync(errFd);
  // It has this server's niceness; its session is lowered the same (../priority.ts).
  lowerSessionPriority(child.pid, os.getPriority());
  child.unref();
  child.stdin!.on('error', () => undefined);
  return child;
}

/** Starts worker processes for one cluster's API server (api/server.ts makes one). */
export interface TaskForker {
  /** Starts a worker process for `job` and returns its UPID; its log exists when this returns. */
  fork(task: Omit<Upid, 'pid' | 'pstart' | 'starttime'>, job: TaskJob): string;
}

export function taskForker(dir: string): TaskForker {
  /**
   * A worker started ahead, its modules loaded, waiting for its job on stdin: Node's
   * start-up (most of a task's cost in the sandbox) is paid before the request comes.
   * Without a job it exits when the server goes (its stdin closes).
   */
  let spare: ChildProcess | undefined;
  return {
    fork(task, job) {
      const ready = spare && spare.exitCode === null && spare.signalCode === null ? spare : undefined;
      const child = ready ?? spawnWorker(dir);
      spare = spawnWorker(dir);
      const starttime = Math.floor(Date.now() / 1000);
      const pid = child.pid!;
      let pstart = procStartTime(pid);
      for (let i = 0; pstart === undefined && i < 100; i++) {
        sleepSync(5);
        pstart = procStartTime(pid);
      }
      const upid = encodeUpid({ ...task, pid, pstart: Number(pstart ?? 0), starttime });
      const log = taskLogFile(dir, upid)!;
      fs.mkdirSync(path.dirname(log), { recursive: true });
      fs.writeFileSync(log, '');
      child.stdin!.end(JSON.stringify({ dir, node: task.node, upid, job }));
      return upid;
    },
  };
}

export function appendTaskLine(file: string, line: string): void {
  fs.appendFileSync(file, line + '\n');
}

export function taskRunning(u: Upid): boolean {
  const st = procStartTime(u.pid);
  if (st === undefined || Number(st) !== u.pstart) return false;
  // An exited worker its parent has not reaped yet has ended too.
  const state = readProcFile(`/proc/${u.pid}/stat`)?.split(') ')[1]?.[0];
  return state !== 'Z' && state !== 'X';
}

/** PVE::UPID::read_status: the exit status from the log's last line. */
export function readExitStatus(file: string): string {
  const raw = readIfExists(file);
  if (raw === undefined) return 'unable to get last line from task log - no such file';
  const last = raw.replace(/\n$/, '').split('\n').pop() ?? '';
  if (last === 'TASK OK') return 'OK';
  const err = /^TASK ERROR: (.+)$/.exec(last);
  if (err) return err[1];
  const warn = /^TASK (WARNINGS: \d+)$/.exec(last);
  return warn ? warn[1] : 'unexpected status';
}

/** PVE::Tools::dump_logfile: lines from `start` (0-based), at most `limit` (0 = all), numbered from 1. */
export function readTaskLog(file: string, start: number, limit: number): { total: number; lines: Array<{ n: number; t: string }> } {
  const raw = readIfExists(file);
  if (raw === undefined) return { total: 1, lines: [{ n: 1, t: 'unable to open file - No such file or directory' }] };
  const all = raw === '' ? [] : raw.replace(/\n$/, '').split('\n');
  if (all.length === 0) return { total: 1, lines: [{ n: 1, t: 'no content' }] };
  const end = limit === 0 ? all.length : Math.min(all.length, start + limit);
  const lines = [];
  for (let i = start; i < end; i++) lines.push({ n: i + 1, t: all[i] });
  return { total: all.length, lines };
}

export interface TaskEntry extends Upid {
  upid: string;
  running: boolean;
  endtime?: number;
  status?: string;
}

/** Every task of `node`, newest first. */
export function listTasks(dir: string, node: string): TaskEntry[] {
  const root = clusterPaths(dir).tasksDir;
  const out: TaskEntry[] = [];
  let subdirs: string[] = [];
  try {
    subdirs = fs.readdirSync(root).filter((d) => /^[0-9A-F]$/.test(d));
  } catch {
    return out;
  }
  for (const sub of subdirs) {
    for (const name of fs.readdirSync(path.join(root, sub))) {
      const u = decodeUpid(name);
      if (!u || u.node !== node) continue;
      const file = path.join(root, sub, name);
      const running = taskRunning(u);
      const entry: TaskEntry = { ...u, upid: name, running };
      if (!running) {
        entry.endtime = Math.floor(fs.statSync(file).mtimeMs / 1000);
        entry.status = readExitStatus(file);
      }
      out.push(entry);
    }
  }
  return out.sort((a, b) => b.starttime - a.starttime || (a.upid < b.upid ? 1 : -1));
}

/** Kills the worker processes of tasks still running (a cluster stopped for good). */
export function killRunningTasks(dir: string): void {
  const root = clusterPaths(dir).tasksDir;
  for (const sub of fs.existsSync(root) ? fs.readdirSync(root).filter((d) => /^[0-9A-F]$/.test(d)) : []) {
    for (const name of fs.readdirSync(path.join(root, sub))) {
      const u = decodeUpid(name);
      if (u && taskRunning(u)) {
        try {
          process.kill(u.pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
  }
}
