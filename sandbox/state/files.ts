import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * File primitives with the guarantees the sandbox's separate CLI processes rely on:
 * readers never see half a file, and "create if absent" has exactly one winner.
 */

export function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Replaces `file` in one step: the data goes to a name of its own first (this process's
 * pid and random bytes, so two writers never share one), which is then renamed over
 * `file`. Readers see the old content or the new, never half of it; the last rename wins.
 * Not fsynced: the sandbox writes its state this way many times a second, and a lost
 * write is a lost simulated cluster, nothing more.
 */
export function writeFileAtomic(file: string, data: string, mode = 0o644): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  try {
    fs.writeFileSync(tmp, data, { mode });
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Creates `file` with `data` only if it does not exist yet. The content is written to a
 * temporary file first and then hard-linked into place: link() fails with EEXIST when
 * the name is taken, so across processes exactly one caller wins, and nobody ever sees
 * the file empty. Returns false for the losers.
 */
export function createExclusive(file: string, data: string): boolean {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  fs.writeFileSync(tmp, data);
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    fs.unlinkSync(tmp);
  }
}

export function readIfExists(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * A file of a process under /proc/<pid>, undefined once the process is gone: one that
 * exits between the open and the read answers ESRCH instead of ENOENT.
 */
export function readProcFile(file: string): string | undefined {
  try {
    return readIfExists(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    throw err;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class LockTimeoutError extends Error {}

/**
 * Takes `lockFile` (as withLock does, for this process) until `release()`: a test stands in
 * for another task holding it. Throws if someone holds it already.
 */
export function holdLock(lockFile: string): { release(): void } {
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  if (!createExclusive(lockFile, String(process.pid))) throw new Error(`${lockFile} is held already`);
  return { release: () => fs.rmSync(lockFile, { force: true }) };
}

/** The files of the shared holders of `lockFile`: `<lockFile>.shared-<pid>-<n>`, beside it. */
const sharedPrefix = (lockFile: string) => `${path.basename(lockFile)}.shared-`;

/** Whether a live process holds `lockFile` shared; the files of dead holders are removed. */
function heldShared(lockFile: string): boolean {
  const dir = path.dirname(lockFile);
  const prefix = sharedPrefix(lockFile);
  let held = false;
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix)) continue;
    if (isAlive(Number(name.slice(prefix.length).split('-')[0]))) held = true;
    else fs.rmSync(path.join(dir, name), { force: true });
  }
  return held;
}

const unlinkQuietly = (file: string) => fs.rmSync(file, { force: true });

/**
 * Takes `lockFile` (exclusive) within `deadline`, or throws LockTimeoutError. With
 * `waitShared`, a live shared holder keeps it from being taken as well, as a LOCK_SH flock
 * keeps out a LOCK_EX one; without, the caller only registers as a shared holder under it.
 */
function acquire(lockFile: string, deadline: number, waitShared: boolean): void {
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
    if (createExclusive(lockFile, String(process.pid))) {
      if (!waitShared || !heldShared(lockFile)) return;
      // Let the shared holders finish (and others join them, as flock lets them).
      unlinkQuietly(lockFile);
    } else {
      const owner = Number(readIfExists(lockFile));
      if (owner > 0 && !isAlive(owner)) {
        // Stale: remove it only if it is still the same stale file, then retry the create.
        try {
          if (Number(fs.readFileSync(lockFile, 'utf8')) === owner) fs.unlinkSync(lockFile);
        } catch {
          // someone else cleaned it up
        }
        continue;
      }
    }
    if (Date.now() >= deadline) throw new LockTimeoutError(`timeout waiting for ${lockFile}`);
    sleepSync(wait);
  }
}

/**
 * Runs `fn` holding an exclusive lock file, like PVE's lock_file (flock with a timeout):
 * it waits for an exclusive holder and for every shared one (`withSharedLock`). The lock
 * file holds the owner's pid, so a lock left by a killed process (a test that kills a
 * hanging `qm`) is taken over instead of blocking the cluster forever.
 */
export function withLock<T>(lockFile: string, timeoutMs: number, fn: () => T): T {
  acquire(lockFile, Date.now() + timeoutMs, true);
  try {
    return fn();
  } finally {
    unlinkQuietly(lockFile);
  }
}

/**
 * Runs `fn` holding `lockFile` shared, like pve-common `PVE::Tools::lock_file_full` with
 * `$shared` (flock LOCK_SH): any number of shared holders at once, none while an exclusive
 * one holds it, and no exclusive one while they do. A shared holder is a file beside the
 * lock naming its pid, made under the exclusive lock for an instant; one of a dead
 * process is ignored and removed.
 */
export function withSharedLock<T>(lockFile: string, timeoutMs: number, fn: () => T): T {
  acquire(lockFile, Date.now() + timeoutMs, false);
  const mine = path.join(path.dirname(lockFile), `${sharedPrefix(lockFile)}${process.pid}-${Math.random().toString(36).slice(2)}`);
  try {
    fs.writeFileSync(mine, String(process.pid));
  } finally {
    unlinkQuietly(lockFile);
  }
  try {
    return fn();
  } finally {
    unlinkQuietly(mine);
  }
}
