/**
 * Task ids as PVE::UPID writes them: `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:`
 * with pid, pstart (the worker's start time in clock ticks since boot, /proc/<pid>/stat
 * field 22) and starttime (unix seconds) in upper-case hex of at least 8 digits. The task
 * log lives in a directory named after the last hex digit of starttime.
 */
export interface Upid {
  node: string;
  pid: number;
  pstart: number;
  starttime: number;
  type: string;
  id: string;
  /** `user@realm`, or for a task started with an API token `user@realm!tokenid`. */
  user: string;
}

const hex8 = (n: number) => n.toString(16).toUpperCase().padStart(8, '0');

export function encodeUpid(u: Upid): string {
  return `UPID:${u.node}:${hex8(u.pid)}:${hex8(u.pstart)}:${hex8(u.starttime)}:${u.type}:${u.id}:${u.user}:`;
}

const UPID_RE = /^UPID:([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s/]+):([^:\s/]*):([^:\s/]+):$/;

export function decodeUpid(upid: string): (Upid & { subdir: string }) | undefined {
  const m = UPID_RE.exec(upid);
  if (!m) return undefined;
  return {
    node: m[1],
    pid: parseInt(m[3], 16),
    pstart: parseInt(m[4], 16),
    starttime: parseInt(m[5], 16),
    type: m[6],
    id: m[7],
    user: m[8],
    subdir: m[5].slice(7, 8),
  };
}

