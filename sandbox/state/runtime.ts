import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { clusterPaths } from './paths';
import { readIfExists, readProcFile, sleepSync, writeFileAtomic } from './files';
import { sandboxSourceDir } from '../location';
import { lowerSessionPriority } from '../priority';

/**
 * The "QEMU" process of each running VM: a detached node process (sandbox/vm/main.ts)
 * with a pid file in the state dir. The pid file also records the process's start time
 * from /proc, so a recycled pid is never mistaken for a running VM.
 */
export interface VmProcess {
  pid: number;
  /** /proc/<pid>/stat field 22, in clock ticks since boot. */
  starttime: string;
  /** Unix ms when `qm start` spawned it. */
  startedAt: number;
}


export function procStartTime(pid: number): string | undefined {
  const stat = readProcFile(`/proc/${pid}/stat`);
  // Fields after the command name (which may contain spaces) start at field 3.
  const rest = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return rest?.[19];
}

export function vmProcess(dir: string, vmid: number): VmProcess | undefined {
  const raw = readIfExists(clusterPaths(dir).pidFile(vmid));
  if (!raw) return undefined;
  const rec = JSON.parse(raw) as VmProcess;
  const st = procStartTime(rec.pid);
  if (st === undefined || st !== rec.starttime) return undefined;
  // A zombie (exited, not yet reaped by its parent) is not running, once its last thread
  // is gone: a killed Node process's main thread shows 'Z' while its other threads still
  // exit, and until the last one has, its sockets (the guest's sshd) still accept
  // connections, which then end in a reset instead of a refusal.
  const state = readProcFile(`/proc/${rec.pid}/stat`)?.split(') ')[1]?.[0];
  return (state === 'Z' || state === 'X') && threadCount(rec.pid) <= 1 ? undefined : rec;
}

function threadCount(pid: number): number {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).length;
  } catch {
    return 0;
  }
}

/** What stands for a running VM: a process guest, or a real guest's QEMU supervisor. */
export type VmEntry = 'vm/main.ts' | 'qemu/supervisor.ts';

export function spawnVm(dir: string, vmid: number, entry: VmEntry = 'vm/main.ts'): VmProcess {
  const p = clusterPaths(dir);
  fs.mkdirSync(p.guestDir(vmid), { recursive: true });
  fs.mkdirSync(p.runDir, { recursive: true });
  const out = fs.openSync(p.guestConsole(vmid), 'a');
  const src = sandboxSourceDir();
  const child = spawn(process.execPath, [path.join(src, 'tsrun.js'), path.join(src, ...entry.split('/')), p.root, String(vmid)], {
    // Its own session: the VM outlives the `qm start` that launched it, and the SSH
    // session that ran that `qm start`.
    detached: true,
    stdio: ['ignore', out, out],
    cwd: '/',
    env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', PVE_SANDBOX_DIR: p.root },
  });
  child.unref();
  // Started by the CLI server or an API task it has their niceness; started by a CLI run
  // as the service's own child (`qm reboot`) it gets the sandbox's, which the cluster
  // passes down (../priority.ts). Its session is lowered the same: it is one of its own.
  const niceness = Number(process.env.PVE_SANDBOX_NICENESS);
  lowerSessionPriority(child.pid, Number.isInteger(niceness) ? Math.max(niceness, os.getPriority()) : os.getPriority());
  fs.closeSync(out);
  const pid = child.pid!;
  let starttime = procStartTime(pid);
  for (let i = 0; starttime === undefined && i < 100; i++) {
    sleepSync(5);
    starttime = procStartTime(pid);
  }
  const rec: VmProcess = { pid, starttime: starttime ?? '', startedAt: Date.now() };
  writeFileAtomic(p.pidFile(vmid), JSON.stringify(rec));
  return rec;
}

/**
 * Sends `signal` and waits up to `timeoutMs` for the process to go. Returns false if it
 * is still there (the caller decides whether to escalate).
 */
export function signalVm(dir: string, vmid: number, signal: NodeJS.Signals, timeoutMs: number): boolean {
  const rec = vmProcess(dir, vmid);
  if (!rec) return true;
  try {
    process.kill(rec.pid, signal);
  } catch {
    // already gone
  }
  const deadline = Date.now() + timeoutMs;
  while (vmProcess(dir, vmid)) {
    if (Date.now() >= deadline) return false;
    sleepSync(10);
  }
  return true;
}

export function clearVmProcess(dir: string, vmid: number): void {
  fs.rmSync(clusterPaths(dir).pidFile(vmid), { force: true });
}

export function runningVmids(dir: string): number[] {
  let files: string[] = [];
  try {
    files = fs.readdirSync(clusterPaths(dir).runDir);
  } catch {
    return [];
  }
  return files
    .map((f) => /^(\d+)\.pid$/.exec(f))
    .filter((m): m is RegExpExecArray => !!m)
    .map((m) => Number(m[1]))
    .filter((vmid) => vmProcess(dir, vmid) !== undefined);
}

/**
 * What keeps a VM process from outliving its cluster: every `everyMs` it checks that the
 * cluster directory exists and that the pid file names this process (a new `qm start`
 * may have replaced it; a pid file not written within 5 s never will be), and calls
 * `stop` with the reason when not.
 */
export function watchVmRecord(dir: string, vmid: number, stop: (reason: string) => void, everyMs = 500): void {
  const paths = clusterPaths(dir);
  const bornAt = Date.now();
  setInterval(() => {
    if (!fs.existsSync(paths.root)) return stop('cluster directory removed');
    const rec = readIfExists(paths.pidFile(vmid));
    const owner = rec ? (JSON.parse(rec) as { pid: number }).pid : undefined;
    if (owner !== undefined ? owner !== process.pid : Date.now() - bornAt > 5000) stop('pid file no longer names this process');
  }, everyMs);
}

/**
 * Kills the VMs left running in the cluster directory `dir`: a service keeps them across
 * its own stops on purpose (docs/sandbox.md), a test or a benchmark does not.
 */
export function killVms(dir: string): void {
  for (const vmid of runningVmids(dir)) {
    signalVm(dir, vmid, 'SIGKILL', 5000);
    clearVmProcess(dir, vmid);
  }
}
