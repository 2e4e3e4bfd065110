import os from 'node:os';

/**
 * How much nicer than their starter the sandbox's processes are: its CLI and API servers,
 * its node sshds and, inheriting it, its VMs. They stand for other machines (Proxmox nodes, guests booting and
 * running init scripts), which in a real cluster do not take CPU from QemuRun and its
 * Temporal server. On one machine they do: with 50 installs, 50 guests and the cluster's
 * commands wanted as much CPU as the service itself, and every event waited behind them.
 * At a lower priority they still get every idle cycle.
 */
export const SANDBOX_NICENESS = 10;

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
