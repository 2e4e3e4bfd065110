import fs from 'node:fs';
import os from 'node:os';

/**
 * How much nicer than their starter the sandbox's processes are: its CLI and API servers,
 * its node sshds and, inheriting it, its VMs. They stand for other machines (Proxmox nodes, guests booting and
 * running init scripts), which in a real cluster do not take CPU from QemuRun and its
 * Temporal server. On one machine they do: with 50 installs, 50 guests and the cluster's
 * commands wanted as much CPU as the service itself, and every event waited behind them.
 * At a lower priority they still get every idle cycle.
 */
const SANDBOX_NICENESS = 10;

/** The sandbox's niceness when this process starts it: relative, this one may be nice already. */
export function sandboxNiceness(): number {
  return Math.min(19, os.getPriority() + SANDBOX_NICENESS);
}

/** Lowers a process started by the sandbox's starter to the sandbox's niceness (or `to`). */
export function lowerPriority(pid: number | undefined, to = sandboxNiceness()): void {
  if (pid === undefined || to <= os.getPriority()) return;
  try {
    os.setPriority(pid, to);
  } catch {
    // Not permitted here, or already gone: the sandbox runs as it is, only less politely.
  }
}

/**
 * Lowers a process that leads its own session (spawned detached: a VM, a task worker).
 * With the kernel's autogroup scheduling (on by default) every session is scheduled as
 * one group against every other, and a process's own niceness only ranks it within its
 * group: 50 guests in 50 sessions would each weigh as much as the service and its
 * Temporal server together. The session's own niceness (/proc/<pid>/autogroup) ranks the
 * group. Never call it for a process of the caller's own session: that would lower the
 * caller too.
 */
export function lowerSessionPriority(pid: number | undefined, to = sandboxNiceness()): void {
  if (pid === undefined) return;
  lowerPriority(pid, to);
  try {
    fs.writeFileSync(`/proc/${pid}/autogroup`, String(to));
  } catch {
    // No autogroup scheduling in this kernel, or (unprivileged) more than ten such
    // changes in a second: this session keeps the default weight.
  }
}
