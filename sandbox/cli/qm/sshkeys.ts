import fs from 'node:fs';
import { CliError } from '../errors';
import { uriEscape, uriUnescape } from '../../state/escape';

/**
 * `--sshkeys` names a file on the CLI: qm.pm reads it and URI-escapes the whole content
 * before the API sees it; the API then validates every non-empty line as a public key
 * (with `ssh-keygen -l`; here: a known key type whose base64 blob names the same type).
 */
export function sshkeysFromFile(file: string): string {
  let content: string;
  try {
    content = fs.readFileSync(file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const text = err.code === 'ENOENT' ? 'No such file or directory' : err.code === 'EACCES' ? 'Permission denied' : err.message;
    // Perl's die exits with errno when it is set: 2 for a missing file.
    throw new CliError(`unable to open file '${file}' - ${text}`, err.code === 'ENOENT' ? 2 : 255);
  }
  return uriEscape(content);
}

function validKeyLine(line: string): boolean {
  const m = /^(?:\S+\s+)?((?:ssh|ecdsa|sk)-[\w@.\-]+)\s+([A-Za-z0-9+/]+={0,2})(\s.*)?$/.exec(line.trim());
  if (!m) return false;
  const blob = Buffer.from(m[2], 'base64');
  if (blob.length < 4) return false;
  const len = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + len).toString('latin1') === m[1];
}

export function validateSshKeys(escaped: string): void {
  for (const line of uriUnescape(escaped).split('\n')) {
    if (/^\s*$/.test(line)) continue;
    if (!validKeyLine(line)) throw new CliError('SSH public key validation error');
  }
}
