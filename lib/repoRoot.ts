import fs from 'node:fs';
import path from 'node:path';

/**
 * The project's root (where package.json is), whether this module runs from its TypeScript
 * source or from the compiled copy in dist/: files read at run time (init-scripts/,
 * .tools/) stay at the root and are not copied into dist.
 */
function findRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json')) && path.basename(dir) !== 'dist') return dir;
    if (path.dirname(dir) === dir) return path.resolve(__dirname, '..');
  }
}

export const REPO_ROOT = findRoot();
