import { decodeText, vmConfigOf, type VmConfig } from './vmConfig';

/**
 * A VM's configuration as text, the CLI's side: what `qm config` prints (`key: value`, the
 * description escaped as PVE::Tools::encode_text does), or the file
 * `/etc/pve/nodes/<n>/qemu-server/<id>.conf` (the description as `#` lines, a `[PENDING]`
 * section, snapshots). The API answers the entries themselves and needs none of this.
 */
export function parseVmConfig(text: string): VmConfig {
  const { entries, pending } = vmConfigEntries(text);
  return vmConfigOf(entries, pending);
}

/** The text's entries, the description decoded to plain text; snapshot sections left out. */
export function vmConfigEntries(text: string): { entries: Record<string, string>; pending?: Record<string, string> } {
  const entries: Record<string, string> = {};
  let pending: Record<string, string> | undefined;
  let section: Record<string, string> | undefined = entries;
  const commentLines: string[] = [];

  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') continue;
    const header = /^\[([^\]]+)\]\s*$/.exec(line);
    if (header) {
      // [PENDING] holds unapplied changes; [snapname] sections are snapshots, not wanted.
      section = header[1] === 'PENDING' ? (pending = {}) : undefined;
      continue;
    }
    if (line.startsWith('#')) {
      // In the file, the description is one `#` comment line per text line.
      if (section === entries) commentLines.push(decodeText(line.slice(1)));
      continue;
    }
    const m = /^([a-z][a-z0-9_-]*):\s?(.*)$/i.exec(line);
    if (m && section) section[m[1]] = m[2];
  }

  if (entries.description !== undefined) entries.description = decodeText(entries.description);
  else if (commentLines.length > 0) entries.description = commentLines.join('\n');
  return { entries, ...(pending ? { pending } : {}) };
}
