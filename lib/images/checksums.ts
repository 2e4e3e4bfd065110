import type { ChecksumAlgorithm } from './catalog';

/**
 * Parses the checksum files the distributions publish, in either form:
 *   GNU coreutils  `<hex>  <name>` (text mode) or `<hex> *<name>` (binary mode; Ubuntu)
 *   BSD tag        `SHA256 (<name>) = <hex>` (Rocky, also `sha256sum --tag`)
 * Lines starting with `#` are comments (Rocky's `# <name>: <n> bytes`). Names are kept
 * verbatim: Rocky's CHECKSUM lists many near-identical names, so lookups are exact.
 */

export interface ChecksumEntry {
  fileName: string;
  /** Lower-case hex digest. */
  hex: string;
  /** From the BSD tag, else inferred from the digest length. */
  algorithm: ChecksumAlgorithm | undefined;
}

const BSD = /^(SHA\d+) \((.+)\) = ([0-9a-fA-F]+)$/;
const GNU = /^([0-9a-fA-F]+) [ *](.+)$/;

export function parseChecksums(text: string): ChecksumEntry[] {
  const entries: ChecksumEntry[] = [];
  for (const raw of text.split('\n')) {
    let line = raw.replace(/\r$/, '');
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    // coreutils prefixes a line with `\` when the name holds a backslash or newline and
    // escapes those; undo it so the name compares equal to the real one.
    const escaped = line.startsWith('\\');
    if (escaped) line = line.slice(1);
    const bsd = BSD.exec(line);
    const gnu = bsd ? null : GNU.exec(line);
    if (bsd) {
      entries.push({ fileName: unescape(bsd[2], escaped), hex: bsd[3].toLowerCase(), algorithm: algorithmOf(bsd[1]) });
    } else if (gnu) {
      entries.push({ fileName: unescape(gnu[2], escaped), hex: gnu[1].toLowerCase(), algorithm: byLength(gnu[1]) });
    }
  }
  return entries;
}

/** The entry for exactly `fileName`, or undefined when the file does not list it. */
export function findChecksum(text: string, fileName: string): ChecksumEntry | undefined {
  return parseChecksums(text).find((e) => e.fileName === fileName);
}

function unescape(name: string, escaped: boolean): string {
  return escaped ? name.replace(/\\(\\|n|r)/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : '\\')) : name;
}

function algorithmOf(tag: string): ChecksumAlgorithm | undefined {
  const t = tag.toLowerCase();
  return t === 'sha256' || t === 'sha512' ? t : undefined;
}

function byLength(hex: string): ChecksumAlgorithm | undefined {
  return hex.length === 64 ? 'sha256' : hex.length === 128 ? 'sha512' : undefined;
}
