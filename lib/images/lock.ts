import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A lock file shared by processes on one cache directory (API and worker, or two workers):
 * created with O_EXCL, it holds the owner's pid, host and a random token. The owner touches
 * it while alive, so a lock counts as stale when its pid is gone (same host) or when it has
 * not been touched for `staleMs` (another host on a shared disk, or a pid reused after a
 * container restart). The lock only saves duplicate downloads: the download itself stays
 * correct without it, because nothing unverified ever reaches the final name.
 */

export interface LockOptions {
  /** Untouched this long = stale. The owner touches it every staleMs / 4. */
  staleMs?: number;
  /** How often a waiter looks again. */
  pollMs?: number;
  signal?: AbortSignal;
  /** Called once when the lock is held by someone else and we start waiting. */
  onWait?: (holder: LockOwner | undefined) => void;
}

export interface LockOwner {
  pid: number;
  host: string;
  token: string;
  since: string;
}

export interface HeldLock {
  readonly path: string;
  release(): Promise<void>;
}

/** Tokens of the locks this process holds: a lock with our pid but another token is a
 * leftover of an earlier process that had the same pid. */
// eslint-disable-next-line no-restricted-syntax -- a lock file names a process, so the tokens are the process's
const ownTokens = new Set<string>();

export async function acquireLock(path: string, opts: LockOptions = {}): Promise<HeldLock> {
  const staleMs = opts.staleMs ?? 60_000;
  const pollMs = opts.pollMs ?? 250;
  let waiting = false;
  for (;;) {
    opts.signal?.throwIfAborted();
    const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomUUID(), since: new Date().toISOString() };
    try {
      await fs.writeFile(path, JSON.stringify(owner), { flag: 'wx' });
      return hold(path, owner, staleMs);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const current = await readLock(path);
    if (current === 'gone') continue;
    if (isStale(current, staleMs)) {
      await breakLock(path, current.owner);
      continue;
    }
    if (!waiting) {
      waiting = true;
      opts.onWait?.(current.owner);
    }
    await sleep(pollMs, undefined, { signal: opts.signal }).catch(() => opts.signal?.throwIfAborted());
  }
}

function hold(path: string, owner: LockOwner, staleMs: number): HeldLock {
  ownTokens.add(owner.token);
  // Touching proves liveness to processes that cannot check our pid (other hosts).
  const timer = setInterval(() => {
    const t = new Date();
    fs.utimes(path, t, t).catch(() => undefined);
  }, Math.max(50, staleMs / 4));
  timer.unref();
  let released = false;
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      ownTokens.delete(owner.token);
      // Only remove the file if it is still ours: a waiter may have judged us stale.
      const current = await readLock(path);
      if (current !== 'gone' && current.owner?.token === owner.token) await fs.rm(path, { force: true });
    },
  };
}

interface LockState {
  owner: LockOwner | undefined;
  mtimeMs: number;
}

async function readLock(path: string): Promise<LockState | 'gone'> {
  try {
    const [text, st] = await Promise.all([fs.readFile(path, 'utf8'), fs.stat(path)]);
    return { owner: parseOwner(text), mtimeMs: st.mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const o = JSON.parse(text) as Partial<LockOwner>;
    return typeof o.pid === 'number' && typeof o.token === 'string' && typeof o.host === 'string'
      ? { pid: o.pid, host: o.host, token: o.token, since: String(o.since ?? '') }
      : undefined;
  } catch {
    // Created but not yet written by its owner, or garbage: only age can tell.
    return undefined;
  }
}

function isStale(state: LockState, staleMs: number): boolean {
  if (Date.now() - state.mtimeMs > staleMs) return true;
  const o = state.owner;
  if (!o || o.host !== hostname()) return false;
  if (o.pid === process.pid) return !ownTokens.has(o.token);
  return !pidAlive(o.pid);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes a stale lock without removing a fresh one that replaced it meanwhile: POSIX has
 * no compare-and-delete, so move the file aside, check it is the one judged stale, and put
 * it back (link fails if yet another lock appeared) when it is not.
 */
async function breakLock(path: string, stale: LockOwner | undefined): Promise<void> {
  const aside = `${path}.${randomUUID()}.stale`;
  try {
    await fs.rename(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const moved = parseOwner(await fs.readFile(aside, 'utf8').catch(() => ''));
  if (moved?.token !== stale?.token) await fs.link(aside, path).catch(() => undefined);
  await fs.rm(aside, { force: true });
}
