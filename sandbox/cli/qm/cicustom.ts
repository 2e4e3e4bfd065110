import fs from 'node:fs';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import type { VmConf } from '../../state/vmconf';
import type { CustomCloudinitFiles } from '../../state/cloudinit';
import { fileVolume } from '../storage';

/** What `cicustom` may name, in qemu-server's `$cicustom_fmt`. */
const KINDS = ['meta', 'network', 'user', 'vendor'] as const;

/** PVE::Tools::file_get_contents's cap as read_cloudinit_snippets_file passes it. */
const SNIPPET_MAX_BYTES = 1024 * 1024;

/**
 * qemu-server Cloudinit.pm `get_custom_cloudinit_files` → `read_cloudinit_snippets_file`,
 * at start, on the node the VM starts on: each volume must parse as a `snippets` volume
 * ("… is not in the snippets directory"), and its file must be there: pve-storage
 * Storage.pm `abs_filesystem_path` dies `can't find file '<volid>'` unless it is a regular
 * file, before pve-common's `file_get_contents` opens it (whose `can't open '<path>' - …`
 * only an unreadable file meets). Like Proxmox, whether the storage's `content` lists
 * snippets is not asked; nor is anything of this when `cicustom` is set (only its format,
 * sandbox/cli/formats.ts).
 */
export function customCloudinitFiles(ctx: Pick<Ctx, 'model' | 'node' | 'paths'>, conf: VmConf): CustomCloudinitFiles {
  const raw = conf.props.cicustom;
  if (!raw) return {};
  const files: CustomCloudinitFiles = {};
  for (const part of raw.split(',')) {
    const eq = part.indexOf('=');
    const kind = part.slice(0, eq) as (typeof KINDS)[number];
    const volid = part.slice(eq + 1);
    if (!KINDS.includes(kind) || !volid) continue;
    const vol = fileVolume(ctx, volid);
    if (vol.vtype !== 'snippets' || !vol.file) throw new CliError(`${volid} is not in the snippets directory`);
    if (!fs.statSync(vol.file, { throwIfNoEntry: false })?.isFile()) throw new CliError(`can't find file '${volid}'`);
    let text: Buffer;
    try {
      text = fs.readFileSync(vol.file);
    } catch (e) {
      throw new CliError(`can't open '${vol.shown}' - ${(e as NodeJS.ErrnoException).code === 'EACCES' ? 'Permission denied' : (e as Error).message}`);
    }
    if (text.length > SNIPPET_MAX_BYTES) throw new CliError(`file '${vol.shown}' too long - aborting`);
    files[kind] = text.toString('utf8');
  }
  return files;
}
