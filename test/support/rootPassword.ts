import { execFileSync } from 'node:child_process';

/**
 * What a guest's privileged log (sandbox/vm/shims.ts) shows of the root password: the
 * init script's `chpasswd -e` and the one hash on its stdin, which the system's crypt(3)
 * (through perl, no shell) verifies for `password`. The password itself appears nowhere.
 */
export function expectRootPasswordSetAsHash(log: string, password: string): void {
  const lines = log.split('\n');
  const hashes = lines.flatMap((l) => /^ {2}stdin: root:(\$5\$\S+)$/.exec(l)?.[1] ?? []);
  if (hashes.length === 0) throw new Error(`no root password hash on chpasswd's stdin in:\n${log.slice(-2000)}`);
  for (const hash of hashes) {
    const crypt = execFileSync('perl', ['-e', 'print crypt($ARGV[0], $ARGV[1])', password, hash]).toString();
    if (crypt !== hash) throw new Error(`the hash on chpasswd's stdin is not the root password's: ${hash}`);
  }
  if (!lines.some((l) => / root: chpasswd -e$/.test(l))) throw new Error('chpasswd was not run with -e');
  if (log.includes(password)) throw new Error('the plain root password is in the guest log');
}
