import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { hashCiPassword, sha256Crypt } from '../../lib/proxmox/cipassword';
import { looksHashed, newSalt, sha256Crypt as sandboxCrypt } from '../../sandbox/state/sha256crypt';

/**
 * The SHA-256 crypt vectors of Ulrich Drepper's specification (the ones glibc tests, and
 * `openssl passwd -5 -salt '<salt>' '<password>'` prints): the long salts are cut to 16
 * characters, a round count below 1000 is raised to it.
 */
const VECTORS: Array<[password: string, salt: string, rounds: number | undefined, hash: string]> = [
  ['Hello world!', 'saltstring', undefined, '$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5'],
  ['Hello world!', 'saltstringsaltstring', 10000, '$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA'],
  ['This is just a test', 'toolongsaltstring', 5000, '$5$rounds=5000$toolongsaltstrin$Un/5jzAHMgOGZ5.mWJpuVolil07guHPvOW8mGRcvxa5'],
  [
    'a very much longer text to encrypt.  This one even stretches over morethan one line.',
    'anotherlongsaltstring',
    1400,
    '$5$rounds=1400$anotherlongsalts$Rx.j8H.h8HjEDGomFU8bDkXm3XIUnzyxf12oP84Bnq1',
  ],
  ['we have a short salt string but not a short password', 'short', 77777, '$5$rounds=77777$short$JiO1O3ZpDAxGJeaDIuqCoEFysAe1mZNJRs3pw0KQRd/'],
  ['a short string', 'asaltof16chars..', 123456, '$5$rounds=123456$asaltof16chars..$gP3VQ/6X7UUEW3HkBn2w1/Ptq2jxPyzV/cZKmF/wJvD'],
  ['the minimum number is still observed', 'roundstoolow', 10, '$5$rounds=1000$roundstoolow$yfvwcWrQ8l/K0DAWyuPMDNHpIVlTQebY9l/gL972bIC'],
];

test.each(VECTORS)('%j with salt %s and %s rounds gives the published hash', (password, salt, rounds, hash) => {
  expect(sha256Crypt(password, salt, rounds)).toBe(hash);
});

test.each(VECTORS)("the sandbox's copy: %j with salt %s and %s rounds gives the published hash", (password, salt, rounds, hash) => {
  expect(sandboxCrypt(password, salt, rounds)).toBe(hash);
});

test('agrees with openssl passwd -5 on passwords and salts it has never seen', () => {
  for (let i = 0; i < 5; i++) {
    const password = `${randomBytes(6 + i * 7).toString('base64')} ü ${i}`;
    const salt = i % 2 ? newSalt() : hashCiPassword('x').split('$')[2];
    const openssl = execFileSync('openssl', ['passwd', '-5', '-salt', salt, '-stdin'], { input: `${password}\n` }).toString().trim();
    expect(sha256Crypt(password, salt)).toBe(openssl);
    expect(sandboxCrypt(password, salt)).toBe(openssl);
  }
});

test("the service hashes a cloud-init password with a fresh 16-character salt, and the sandbox's copy checks it", () => {
  const a = hashCiPassword('s3cret pw');
  const b = hashCiPassword('s3cret pw');
  expect(a).toMatch(/^\$5\$[./0-9A-Za-z]{16}\$[./0-9A-Za-z]{43}$/);
  expect(a).not.toBe(b);
  expect(sandboxCrypt('s3cret pw', a.split('$')[2])).toBe(a);
  expect(looksHashed(a)).toBe(true);
  expect(looksHashed('s3cret pw')).toBe(false);
});

test('refuses a salt that could not be read back out of the hash', () => {
  expect(() => sha256Crypt('pw', 'a$b')).toThrow('invalid salt');
  expect(() => sha256Crypt('pw', '')).toThrow('invalid salt');
  expect(() => sandboxCrypt('pw', 'a$b')).toThrow('invalid salt');
});
