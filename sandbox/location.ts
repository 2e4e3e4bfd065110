import fs from 'node:fs';
import path from 'node:path';

/**
 * The sandbox's source directory (bin/, tsrun.js, the .ts entry points). Normally this
 * file's own directory; when the service runs from a `tsc` build (dist/sandbox), the
 * sources are still the ones in the checkout, two levels up.
 */
export function sandboxSourceDir(): string {
  for (const dir of [__dirname, path.resolve(__dirname, '..', '..', 'sandbox')]) {
    if (fs.existsSync(path.join(dir, 'tsrun.js')) && fs.existsSync(path.join(dir, 'bin', 'qm'))) return dir;
  }
  throw new Error(`sandbox sources (tsrun.js, bin/) not found from ${__dirname}`);
}
