import fs from 'node:fs';

/**
 * A secret on disk must be private to the service's user, as ssh insists for private keys:
 * a regular file, no access for group or others. `exposes` says what a reader would get.
 */
export function assertPrivateFile(file: string, setting: string, exposes: string): void {
  const st = fs.statSync(file);
  if (!st.isFile()) throw new Error(`${setting}: ${file} is not a regular file`);
  if ((st.mode & 0o077) !== 0) {
    throw new Error(
      `${setting}: ${file} is accessible by group or others (mode ${(st.mode & 0o777).toString(8)}); ` +
        `anyone who can read it ${exposes}. Run: chmod 600 ${file}`,
    );
  }
}
