import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './paths';
import { readIfExists, sleepSync, withLock, writeFileAtomic } from './files';

/**
 * Faults tests inject into the sandbox's CLIs. They live in a file because every `qm` call
 * is its own process (possibly started by sshd on another "node"); taking one is a
 * read-decrement-write under a lock, so N concurrent calls consume exactly N.
 */
export interface FaultSpec {
  /** Command prefix, e.g. `qm create`, `qm importdisk`, `pvesh get /cluster/resources`. */
  command: string;
  /** Only calls on this node; undefined = any node. */
  node?: string;
  /** Fire for the next N matching calls; undefined = every call until cleared. */
  times?: number;
  /** Fail: print this on stderr... */
  stderr?: string;
  /** ...and exit with this code (default 255 when `stderr` is set). */
  exitCode?: number;
  /** Sleep this long, then fail (with `stderr`/`exitCode`, default exit 255) without acting. */
  hangMs?: number;
  /** Sleep this long, then run the command (or fail, if `stderr`/`exitCode` is set). */
  latencyMs?: number;
  /**
   * Print each as `WARN: <text>` (pve-common `PVE::RESTEnvironment::log_warn`) and run
   * the command: its task then ends `TASK WARNINGS: <n>` instead of `TASK OK`.
   */
  warn?: string[];
  /**
   * Where the fault fires. Absent: before the command runs (in API mode, as its task
   * starts). A step: inside the command's work, once Proxmox's code has done what comes
   * before it; after `latencyMs` the step fails with `stderr` as its error, and the command
   * ends as Proxmox's does when its task fails there. `create_base`: `qm template`'s
   * conversion of a disk into a base volume (pve-storage `vdisk_create_base`), after
   * `template: 1` was written (qemu-server API2/Qemu.pm `template`). Counted (`times`)
   * when the call starts, reached or not.
   */
  at?: FaultStep;
}

/** The steps inside a command a fault can fail (FaultSpec.at). */
export type FaultStep = 'create_base';

interface StoredFault extends FaultSpec {
  id: number;
}

/** `qm importdisk` is an alias of `qm disk import` (and `resize` of `disk resize`): both spellings match. */
function canonical(tokens: string[]): string[] {
  if (tokens[0] !== 'qm') return tokens;
  const alias: Record<string, string[]> = { importdisk: ['disk', 'import'], resize: ['disk', 'resize'] };
  const a = alias[tokens[1]];
  return a ? ['qm', ...a, ...tokens.slice(2)] : tokens;
}

function faultMatches(command: string, argv: string[]): boolean {
  const want = canonical(command.trim().split(/\s+/));
  const got = canonical(argv);
  return want.every((t, i) => got[i] === t);
}

function lockFile(dir: string): string {
  return path.join(clusterPaths(dir).locksDir, 'faults.lock');
}

function load(dir: string): StoredFault[] {
  const raw = readIfExists(clusterPaths(dir).faults);
  return raw ? (JSON.parse(raw) as StoredFault[]) : [];
}

export function addFault(dir: string, fault: FaultSpec): void {
  withLock(lockFile(dir), 10_000, () => {
    const faults = load(dir);
    const id = faults.reduce((m, f) => Math.max(m, f.id), 0) + 1;
    faults.push({ ...fault, id });
    writeFileAtomic(clusterPaths(dir).faults, JSON.stringify(faults, null, 2));
  });
}

export function clearFaults(dir: string): void {
  withLock(lockFile(dir), 10_000, () => fs.rmSync(clusterPaths(dir).faults, { force: true }));
}

/** Every fault that matches this call, each consumed once (in injection order). */
export function takeFaults(dir: string, node: string, argv: string[]): FaultSpec[] {
  if (!fs.existsSync(clusterPaths(dir).faults)) return [];
  return withLock(lockFile(dir), 10_000, () => {
    const faults = load(dir);
    const fired: FaultSpec[] = [];
    const left: StoredFault[] = [];
    for (const f of faults) {
      if ((f.node === undefined || f.node === node) && faultMatches(f.command, argv) && (f.times === undefined || f.times > 0)) {
        fired.push(f);
        if (f.times !== undefined && f.times - 1 <= 0) continue;
        left.push(f.times === undefined ? f : { ...f, times: f.times - 1 });
      } else {
        left.push(f);
      }
    }
    if (fired.length > 0) writeFileAtomic(clusterPaths(dir).faults, JSON.stringify(left, null, 2));
    return fired;
  });
}

/**
 * The fault a call took for `step` (FaultSpec.at), consumed: it sleeps its latency and
 * returns the error text the step fails with; undefined when none is for that step.
 */
export function takeStepFault(faults: FaultSpec[] | undefined, step: FaultStep): string | undefined {
  const i = faults?.findIndex((f) => f.at === step) ?? -1;
  if (i < 0) return undefined;
  const [fault] = faults!.splice(i, 1);
  if (fault.latencyMs) sleepSync(fault.latencyMs);
  return (fault.stderr ?? 'command failed').replace(/\n+$/, '');
}
