import fs from 'node:fs';
import path from 'node:path';

/**
 * The sandbox's source directory (bin/, tsrun.js, the .ts entry points its processes run
 * from). Normally this file's own directory; when the package is loaded from its `tsc`
 * build (sandbox/dist), the sources are the package's, one level up.
 */
export function sandboxSourceDir(): string {
  for (const dir of [__dirname, path.resolve(__dirname, '..')]) {
    if (fs.existsSync(path.join(dir, 'tsrun.js')) && fs.existsSync(path.join(dir, 'bin', 'qm'))) return dir;
  }
  throw new Error(`sandbox sources (tsrun.js, bin/) not found from ${__dirname}`);
}
