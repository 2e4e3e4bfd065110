import { execFileSync } from 'node:child_process';
import { hashRootPassword, ROOT_PASSWORD_ROUNDS } from '../../lib/rootPassword';
import { initScriptEnv } from '../../lib/initScripts';

/** The system's crypt(3) (glibc / libxcrypt, as on the guests), through perl. */
function systemCrypt(password: string, setting: string): string {
  return execFileSync('perl', ['-e', 'print crypt($ARGV[0], $ARGV[1])', password, setting]).toString();
}

const SETTINGS = { timezone: 'UTC', locale: 'C.UTF-8', packages: [], swapSize: '0' };

test("the root password's hash is one the system's crypt accepts for that password and no other", () => {
  const password = `R00t pässword ${process.pid}`;
  const hash = hashRootPassword(password);
  expect(hash).toMatch(new RegExp(`^\\$5\\$rounds=${ROOT_PASSWORD_ROUNDS}\\$[./0-9A-Za-z]{16}\\$[./0-9A-Za-z]{43}$`));
  expect(systemCrypt(password, hash)).toBe(hash);
  expect(systemCrypt(`${password}x`, hash)).not.toBe(hash);
  expect(hashRootPassword(password)).not.toBe(hash); // a fresh salt each time
});

test('the init script gets the hash only, never the password', () => {
  const hash = hashRootPassword('secret-root-pw');
  const env = initScriptEnv(SETTINGS, { hash });
  expect(env.QEMURUN_ROOT_PASSWORD_HASH).toBe(hash);
  expect(env.QEMURUN_ROOT_PASSWORD).toBeUndefined();
  expect(JSON.stringify(env)).not.toContain('secret-root-pw');
  expect(() => initScriptEnv(SETTINGS, { hash: 'root:x\nother' })).toThrow(/root password hash must be a crypt hash/);
});
