import fs from 'node:fs';

/** What the benchmark reads about a process from /proc (Linux only). */

const TICK = 100; // USER_HZ: clock ticks per second on every Linux the project runs on

export interface CpuTimes {
  /** Seconds the process itself ran (user + system). */
  self: number;
  /** Seconds its waited-for children ran, e.g. sandbox CLIs it started. */
  children: number;
}

function statFields(pid: number): string[] | undefined {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may contain spaces: split after it.
    return raw.slice(raw.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

export function cpuTimes(pid: number): CpuTimes {
  const f = statFields(pid);
  if (!f) return { self: 0, children: 0 };
  // After the name: state ppid ... utime(11) stime(12) cutime(13) cstime(14), 0-based.
  return { self: (Number(f[11]) + Number(f[12])) / TICK, children: (Number(f[13]) + Number(f[14])) / TICK };
}

/** Resident set size in bytes (VmRSS). */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * VmRSS split as the kernel counts it: anonymous memory (the V8 heaps, malloc, the
 * Temporal core's) and file pages (the node binary and native addons, shared with every
 * other process that maps them).
 */
export function rssParts(pid: number): { anon: number; file: number } {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem') };
  } catch {
    return { anon: 0, file: 0 };
  }
}

export function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

export function commandName(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Every live descendant of `pid`, found through the parent ids in /proc. */
export function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const f = statFields(Number(name));
    if (f) parentOf.set(Number(name), Number(f[1]));
  }
  const out: number[] = [];
  const frontier = [pid];
  while (frontier.length > 0) {
    const p = frontier.pop()!;
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        out.push(child);
        frontier.push(child);
      }
    }
  }
  return out;
}
