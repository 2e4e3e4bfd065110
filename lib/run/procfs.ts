import fs from 'node:fs';

/*
 * What Linux says about a process, read from /proc. A pid alone can be recycled; a pid with
 * its start time (field 22 of /proc/<pid>/stat, clock ticks since boot) names one process.
 */

function readOrUndefined(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Fields of /proc/<pid>/stat after the command name, which may contain spaces and ')'. */
function statFields(pid: number): string[] | undefined {
  const stat = readOrUndefined(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

export function procStartTime(pid: number): string | undefined {
  return statFields(pid)?.[19];
}

/** Alive: it exists and is not a zombie waiting to be reaped. */
export function isAlive(pid: number, starttime: string): boolean {
  const fields = statFields(pid);
  if (!fields || fields[19] !== starttime) return false;
  return fields[0] !== 'Z' && fields[0] !== 'X';
}

/** The command line of a process, for messages ("pid 812: nginx -g daemon off;"). */
export function commandLine(pid: number): string {
  const raw = readOrUndefined(`/proc/${pid}/cmdline`);
  return raw ? raw.replace(/\0+$/, '').split('\0').join(' ').replace(/\s+/g, ' ').slice(0, 120) : '?';
}

/** Every descendant of `pid` (children first level first), read from /proc. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = Number(statFields(Number(entry))?.[1]);
    if (!Number.isFinite(ppid)) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const c of children.get(queue.shift()!) ?? []) {
      found.push(c);
      queue.push(c);
    }
  }
  return found;
}

/**
 * The pid of the process listening on TCP `port` (any address), if this user can see it.
 * Reads the listening sockets' inodes from /proc/net/tcp{,6}, then finds the process that
 * holds one of them open.
 */
export function listenerPid(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of (readOrUndefined(table) ?? '').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; st 0A is LISTEN.
      if (f.length > 9 && f[3] === '0A' && parseInt(f[1].split(':')[1], 16) === port) inodes.add(f[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let link: string;
      try {
        link = fs.readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m && inodes.has(m[1])) return Number(entry);
    }
  }
  return undefined;
}
