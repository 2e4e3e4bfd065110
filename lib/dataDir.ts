import fs from 'node:fs';
import type { Logger } from './observability/log';

/**
 * DATA_DIR holds the encryption key, the run records and the cluster's cached facts:
 * made private to the service's user (0700). One that already exists is left as the
 * operator made it, with a warning when others can enter it.
 */
export function ensureDataDir(dir: string, logger?: Pick<Logger, 'warn'>): void {
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // mkdir's mode passes through the umask, which may only take permissions away.
    fs.chmodSync(dir, 0o700);
    return;
  }
  const mode = fs.statSync(dir).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    logger?.warn({ dataDir: dir }, `DATA_DIR ${dir} is accessible by group or others (mode ${mode.toString(8)}); run: chmod 700 ${dir}`);
  }
}
