import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

/**
 * Replaces `file` in one step: the data goes to a name of its own first (this process's
 * pid and random bytes, so two writers, threads or processes, never share one), which is
 * then renamed over `file`. Readers see the old content or the new, never half of it; the
 * last rename wins. Not fsynced: the files written this way are caches and records that
 * are rebuilt or ignored when lost, and the sandbox writes its state this way many times
 * a second.
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
