import { createHash, randomBytes } from 'node:crypto';

/**
 * SHA-256 crypt as PVE::Tools::encrypt_pw stores it for `qm set --cipassword`, and what
 * cloud-init hands to the guest's /etc/shadow (`$5$<salt>$<hash>`, Ulrich Drepper's
 * specification), so the sandbox writes real, verifiable hashes. A copy of the service's
 * (lib/proxmox/cipassword.ts), not an import of it, as the sandbox is a package of its
 * own: test/unit/cipassword.test.ts holds both to the specification's published vectors
 * and to `openssl passwd -5`, so they cannot agree on a wrong hash.
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

/** An 8-character salt from the alphabet encrypt_pw's sha1_base64 produces ('+' -> 'X'). */
export function newSalt(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789X/';
  return [...randomBytes(8)].map((v) => alphabet[v & 63]).join('');
}

/** Values that already are crypt hashes are stored as given (qemu-server's check). */
export function looksHashed(value: string): boolean {
  return /^\$(?:[156]|2[ay])(\$.+){2}/.test(value);
}
