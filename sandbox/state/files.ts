import fs from 'node:fs';
import path from 'node:path';

/**
 * File primitives with the guarantees the sandbox's separate CLI processes rely on:
 * readers never see half a file, and "create if absent" has exactly one winner.
 */

export function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Replaces `file` in one step (write aside, then rename): the service's own helper. */
export { writeFileAtomic } from '../../lib/atomicFile';

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
 * Runs `fn` holding an exclusive lock file, like PVE's lock_file (flock with a timeout).
 * The lock file holds the owner's pid, so a lock left by a killed process (a test that
 * kills a hanging `qm`) is taken over instead of blocking the cluster forever.
 */
/**
 * Takes `lockFile` (as withLock does, for this process) until `release()`: a test stands in
 * for another task holding it. Throws if someone holds it already.
 */
export function holdLock(lockFile: string): { release(): void } {
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  if (!createExclusive(lockFile, String(process.pid))) throw new Error(`${lockFile} is held already`);
  return { release: () => fs.rmSync(lockFile, { force: true }) };
}

export function withLock<T>(lockFile: string, timeoutMs: number, fn: () => T): T {
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
    if (createExclusive(lockFile, String(process.pid))) break;
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
    if (Date.now() >= deadline) throw new LockTimeoutError(`timeout waiting for ${lockFile}`);
    sleepSync(wait);
  }
  try {
    return fn();
  } finally {
    try {
      fs.unlinkSync(lockFile);
    } catch {
      // already removed
    }
  }
}
