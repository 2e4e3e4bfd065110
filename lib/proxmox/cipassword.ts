import { createHash, randomBytes } from 'node:crypto';

/**
 * The cloud-init password as Proxmox stores it: SHA-256 crypt (`$5$<salt>$<hash>`, Ulrich
 * Drepper's specification), what PVE::Tools::encrypt_pw makes of a plain `--cipassword`.
 * qemu-server keeps a value that already is a crypt hash as given, so hashing here means
 * the plain password never leaves the service: not in qm's argv on the node (readable in
 * /proc by every local user while qm runs, and by process accounting), not in its stdin.
 * The sandbox's qm stores its hashes with a copy of this function (sandbox/state/sha256crypt.ts),
 * held to the same published vectors (test/unit/cipassword.test.ts), so both sides agree.
 *
 * Written here rather than taken from npm: the one maintained pure-JS implementation
 * (unixcrypt) ships as an ES module with only an `import` export, which this CommonJS
 * build cannot require, and the others are native addons over libcrypt or unmaintained.
 */

const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** The specification's default, written without `rounds=`; a given count is clamped to its range. */
const ROUNDS_DEFAULT = 5000;
const ROUNDS_MIN = 1000;
const ROUNDS_MAX = 999_999_999;

function sha256(...parts: Buffer[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

/** `len` bytes made of `block` repeated (the specification's P and S sequences). */
function repeatTo(block: Buffer, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let i = 0; i < len; i += block.length) block.copy(out, i, 0, Math.min(block.length, len - i));
  return out;
}

/**
 * SHA-256 crypt of `password` with `salt` (no `$`; only its first 16 characters count, as
 * in glibc), 5000 rounds unless `rounds` is given: then the hash says `rounds=<n>$`.
 */
export function sha256Crypt(password: string, salt: string, rounds?: number): string {
  if (!/^[^$:\n]+$/.test(salt)) throw new Error('invalid salt');
  const count = rounds === undefined ? ROUNDS_DEFAULT : Math.min(ROUNDS_MAX, Math.max(ROUNDS_MIN, Math.floor(rounds)));
  const p = Buffer.from(password, 'utf8');
  const s = Buffer.from(salt, 'utf8').subarray(0, 16);

  const b = sha256(p, s, p);
  const a = createHash('sha256').update(p).update(s).update(repeatTo(b, p.length));
  for (let n = p.length; n > 0; n >>= 1) a.update(n & 1 ? b : p);
  const digestA = a.digest();

  const pSeq = repeatTo(sha256(...Array.from({ length: p.length }, () => p)), p.length);
  const sSeq = repeatTo(sha256(...Array.from({ length: 16 + digestA[0] }, () => s)), s.length);

  let c = digestA;
  for (let r = 0; r < count; r++) {
    const h = createHash('sha256');
    h.update(r & 1 ? pSeq : c);
    if (r % 3) h.update(sSeq);
    if (r % 7) h.update(pSeq);
    h.update(r & 1 ? c : pSeq);
    c = h.digest();
  }

  const order: Array<[number, number, number, number]> = [
    [0, 10, 20, 4], [21, 1, 11, 4], [12, 22, 2, 4], [3, 13, 23, 4], [24, 4, 14, 4],
    [15, 25, 5, 4], [6, 16, 26, 4], [27, 7, 17, 4], [18, 28, 8, 4], [9, 19, 29, 4],
  ];
  let out = '';
  const b64 = (w: number, n: number) => {
    for (let i = 0; i < n; i++, w >>= 6) out += ITOA64[w & 0x3f];
  };
  for (const [x, y, z, n] of order) b64((c[x] << 16) | (c[y] << 8) | c[z], n);
  b64((c[31] << 8) | c[30], 3);
  return `$5$${rounds === undefined ? '' : `rounds=${count}$`}${s.toString('utf8')}$${out}`;
}

/** `$5$[rounds=<n>$]<salt>$<hash>`: a hash kept from before must be one qemu-server stores as given. */
const SHA256_CRYPT = /^\$5\$(?:rounds=\d+\$)?[^\s$]+\$[./0-9A-Za-z]+$/;

/**
 * The hash `qm set --cipassword` gets: one kept from before (`cipasswordHash`, checked to
 * be SHA-256 crypt) or the plain password's; undefined when neither is given.
 */
export function ciPasswordHashOf(secrets: { cipassword?: string; cipasswordHash?: string }): string | undefined {
  const { cipassword, cipasswordHash } = secrets;
  if (cipassword !== undefined && cipasswordHash !== undefined) throw new Error('give cipassword or cipasswordHash, not both');
  if (cipasswordHash !== undefined && !SHA256_CRYPT.test(cipasswordHash)) throw new Error('cipasswordHash must be a SHA-256 crypt hash');
  return cipasswordHash ?? (cipassword !== undefined ? hashCiPassword(cipassword) : undefined);
}

/** Longer passwords are refused: the algorithm's cost grows with the square of the length. */
export const MAX_CIPASSWORD_LENGTH = 1024;

/** The hash for `qm set --cipassword`, with a fresh random 16-character salt. */
export function hashCiPassword(password: string): string {
  if (password.length > MAX_CIPASSWORD_LENGTH) throw new Error(`cipassword is longer than ${MAX_CIPASSWORD_LENGTH} characters`);
  return sha256Crypt(password, cryptSalt());
}

/** A fresh random 16-character crypt salt. */
export function cryptSalt(): string {
  return [...randomBytes(16)].map((v) => ITOA64[v & 63]).join('');
}
