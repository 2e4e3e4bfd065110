/**
 * The two percent-encodings Proxmox writes into VM configs. Both work on UTF-8 bytes and
 * print upper-case hex, like Perl's URI::Escape.
 */

function escapeBytes(text: string, keep: (byte: number) => boolean): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    out += keep(byte) ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** URI::Escape::uri_escape: everything but A-Za-z0-9 - . _ ~ (used for `sshkeys`). */
export function uriEscape(text: string): string {
  return escapeBytes(text, (b) => /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)));
}

export function uriUnescape(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const m = /^%([0-9A-Fa-f]{2})/.exec(text.slice(i, i + 3));
    if (m) {
      bytes.push(parseInt(m[1], 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(text[i], 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** PVE::Tools::encode_text: control characters, ':' and non-ASCII (description lines). */
export function encodeText(text: string): string {
  return escapeBytes(text, (b) => (b >= 0x20 && b <= 0x39) || (b >= 0x3b && b <= 0x7e));
}

export const decodeText = uriUnescape;
