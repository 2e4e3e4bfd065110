/**
 * A VM's configuration as typed values for what the service reads, every raw entry for the
 * rest: one type for both implementations. The CLI reads `qm config` text (or the config
 * file) into entries with ./vmConfigText; the API answers entries as JSON. Both go through
 * `vmConfigOf` here.
 */

/** A disk or CD-ROM entry: `scsi0: local-lvm:vm-100-disk-0,discard=on,size=32G`. */
export interface VmDisk {
  /** Config key: scsi0, ide2, virtio1, unused0, efidisk0, ... */
  key: string;
  /** Volume ID: `local-lvm:vm-100-disk-0`, `local:100/vm-100-disk-0.qcow2`, or `none`. */
  volid: string;
  /** The `key=value` options after the volume ID. */
  options: Record<string, string>;
  /** From `size=`, when present. */
  sizeBytes?: number;
  /** `media=cdrom` (cloud-init drive, ISO). */
  cdrom: boolean;
}

export interface VmConfig {
  /**
   * Every entry of the current configuration (pending values merged, as qm shows them), as
   * text: `description` plain, `sshkeys` URI-escaped as Proxmox stores it.
   */
  entries: Record<string, string>;
  /** The description text (multi-line), if any. */
  description?: string;
  name?: string;
  cores?: number;
  sockets?: number;
  /** MiB. */
  memory?: number;
  /** MiB; 0 means the balloon device is off. */
  balloon?: number;
  cpu?: string;
  /** `tags: a;b` split into its tags. */
  tags: string[];
  /** `lock: create|migrate|backup|...` while a task holds the VM. */
  lock?: string;
  /** Decoded `sshkeys` (the URI-escaped text qm stores), one key per line. */
  sshkeys?: string;
  disks: VmDisk[];
  /** The `[PENDING]` section of a config file (qm config merges it instead). */
  pending?: Record<string, string>;
}

/** Config keys whose value is a volume. */
const DISK_KEY = /^(?:ide|sata|scsi|virtio|unused|efidisk|tpmstate)\d+$/;

/**
 * A config value as Proxmox gives it: text from `qm config`; from the API a string or a
 * JSON number (`cores: 2`, though `memory: "2048"` may come as a string).
 */
export type VmConfigValue = string | number;

/**
 * The typed configuration of a VM from its entries. `description` is plain text (the CLI
 * reader decodes qm's escaping; the API sends it plain), `sshkeys` the URI-escaped text
 * Proxmox stores (both hand it over so). `pending`: a config file's `[PENDING]` section.
 */
export function vmConfigOf(raw: Readonly<Record<string, VmConfigValue>>, pending?: Record<string, string>): VmConfig {
  const entries = Object.fromEntries(Object.entries(raw).map(([key, value]) => [key, String(value)]));
  const num = (key: string): number | undefined => {
    const v = entries[key];
    return v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined;
  };
  return {
    entries,
    description: entries.description,
    name: entries.name,
    cores: num('cores'),
    sockets: num('sockets'),
    memory: num('memory'),
    balloon: num('balloon'),
    cpu: entries.cpu,
    tags: (entries.tags ?? '').split(/[;,\s]+/).filter(Boolean),
    lock: entries.lock,
    sshkeys: entries.sshkeys !== undefined ? decodeText(entries.sshkeys) : undefined,
    disks: Object.entries(entries)
      .filter(([key]) => DISK_KEY.test(key))
      .map(([key, value]) => parseDrive(key, value)),
    ...(pending ? { pending } : {}),
  };
}

/** When Proxmox created the VM (`meta: creation-qemu=...,ctime=<epoch s>`), epoch seconds. */
export function creationTimeSec(conf: Pick<VmConfig, 'entries'>): number | undefined {
  const ctime = parsePropertyString(conf.entries.meta ?? '').ctime;
  return ctime !== undefined && /^\d+$/.test(ctime) ? Number(ctime) : undefined;
}

/** `local-lvm:vm-100-disk-0,discard=on,size=32G` → volume ID plus options. */
export function parseDrive(key: string, value: string): VmDisk {
  const [first, ...rest] = value.split(',');
  // The volume may also be given as `file=<volid>` (the schema's default key).
  const options = parsePropertyString(rest.join(','));
  const volid = first.includes('=') && first.startsWith('file=') ? first.slice(5) : first;
  const size = options.size !== undefined ? parseSize(options.size) : undefined;
  return {
    key,
    volid,
    options,
    ...(size !== undefined ? { sizeBytes: size } : {}),
    cdrom: options.media === 'cdrom',
  };
}

/** `a=1,b=2` → `{a: '1', b: '2'}`; a bare word (e.g. `virtio` in net0) maps to ''. */
export function parsePropertyString(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of value.split(',')) {
    if (part === '') continue;
    const i = part.indexOf('=');
    if (i < 0) out[part] = '';
    else out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}

const UNIT: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** Proxmox sizes: `32G`, `2252M`, `10737418240` (bytes); units are powers of 1024. */
export function parseSize(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)([KMGT]?)$/i.exec(size.trim());
  return m ? Math.round(Number(m[1]) * UNIT[m[2].toUpperCase()]) : undefined;
}

/**
 * Reverses PVE::Tools::encode_text / qm's URI-escaping of `sshkeys`: `%XX` are bytes of
 * UTF-8 text.
 */
export function decodeText(text: string): string {
  // Escaped bytes come in runs; a multi-byte character is always escaped whole.
  return text.replace(/(?:%[0-9a-f]{2})+/gi, (run) =>
    Buffer.from(run.slice(1).split('%').map((h) => parseInt(h, 16))).toString('utf8'),
  );
}
