/**
 * What an OpenSSH public key line is, checked without Node.js: the workflows and the
 * activities run this check too (through the input schemas), and workflow code has no
 * Buffer. Only the first bytes of the key blob are decoded: the type it names.
 */

export const OPENSSH_KEY_TYPES: readonly string[] = [
  'ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com',
];

const KEY_LINE = /^(\S+) ([A-Za-z0-9+/]+={0,2})(?: ([\x20-\x7e]{0,200}))?$/;
const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Longer than every type name: a blob whose first string is longer names none of them. */
const MAX_TYPE_LENGTH = 64;

/** One `type base64 [comment]` line (no options before the type) whose base64 blob names the same key type. */
export function isOpenSshPublicKey(line: string): boolean {
  const m = KEY_LINE.exec(line);
  if (!m || !OPENSSH_KEY_TYPES.includes(m[1])) return false;
  return blobKeyType(m[2]) === m[1];
}

/** The key type a base64 key blob names: its first string (uint32 big-endian length, then the bytes). */
function blobKeyType(base64: string): string | undefined {
  const bytes = decodePrefix(base64, 4 + MAX_TYPE_LENGTH);
  if (bytes.length < 4) return undefined;
  const length = bytes[0] * 2 ** 24 + bytes[1] * 2 ** 16 + bytes[2] * 2 ** 8 + bytes[3];
  if (length > MAX_TYPE_LENGTH || bytes.length < 4 + length) return undefined;
  return String.fromCharCode(...bytes.slice(4, 4 + length));
}

/** The first `max` bytes `base64` decodes to (it is already known to hold base64 characters only). */
function decodePrefix(base64: string, max: number): number[] {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const ch of base64) {
    if (ch === '=' || out.length >= max) break;
    acc = (acc << 6) | BASE64.indexOf(ch);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
      acc &= (1 << bits) - 1;
    }
  }
  return out;
}

/** The key lines of a pubkey field as a client may send it: trimmed, blank lines dropped. */
export function keyLines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}
