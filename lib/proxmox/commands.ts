import { ciPasswordHashOf } from './cipassword';

/**
 * Every qm / pvesh / pvesm invocation the service makes, as a pure argv builder. Nothing
 * here runs anything or knows about shells: the executor passes each element as one
 * literal argument.
 */

export type Argv = string[];

/** One `--key value` option value; `undefined` leaves the option out. */
export type OptionValue = string | number | boolean | undefined;

/** Options of `qm create` the service uses. Anything else passes through. */
export interface QmCreateOptions {
  name?: string;
  cores?: number;
  sockets?: number;
  cpu?: string;
  scsihw?: string;
  memory?: number;
  balloon?: number;
  numa?: number | boolean;
  ostype?: string;
  agent?: string | number;
  net0?: string;
  serial0?: string;
  vga?: string;
  tags?: string;
  description?: string;
  [option: string]: OptionValue;
}

/**
 * Options of `qm set`. `sshkeys` and `cipassword` are absent on purpose:
 * they are secrets and go through `ProxmoxNode.setVmOptions`, never into an argv here.
 */
export interface QmSetOptions {
  ciuser?: string;
  ciupgrade?: number | boolean;
  tags?: string;
  scsi0?: string;
  ide2?: string;
  boot?: string;
  bootdisk?: string;
  ipconfig0?: string;
  /** Cloud-init DNS: addresses separated by spaces (Proxmox's address-list), and the search domain. */
  nameserver?: string;
  searchdomain?: string;
  cores?: number;
  memory?: number;
  balloon?: number;
  numa?: number | boolean;
  cpu?: string;
  name?: string;
  description?: string;
  /** Proxmox refuses to destroy the VM or remove its disks while set (templates the product builds). */
  protection?: boolean;
  /** Comma-separated option names to remove. */
  delete?: string;
  skiplock?: boolean;
  [option: string]: OptionValue;
}

const vm = (vmid: number): string => {
  if (!Number.isInteger(vmid) || vmid < 1) throw new RangeError(`invalid VMID: ${vmid}`);
  return String(vmid);
};

/**
 * `--key value` pairs in the given order. Booleans become 1/0, as the Proxmox schema
 * expects. Option names are checked so that no value can pose as an option name.
 */
export function options(opts: Record<string, OptionValue>): Argv {
  const argv: Argv = [];
  for (const [key, value] of Object.entries(opts)) {
    if (value === undefined) continue;
    if (!/^[a-z][a-z0-9_-]*$/i.test(key)) throw new Error(`invalid option name: ${key}`);
    argv.push(`--${key}`, typeof value === 'boolean' ? (value ? '1' : '0') : String(value));
  }
  return argv;
}

export const qmCreate = (vmid: number, opts: QmCreateOptions): Argv => ['qm', 'create', vm(vmid), ...options(opts)];

/**
 * `qm importdisk` works on every PVE release; `qm disk import` only from 7.3. The output
 * ends in a line naming the new volume (see parseImportDisk).
 */
export const qmImportDisk = (
  vmid: number,
  file: string,
  storage: string,
  opts: { format?: 'raw' | 'qcow2' | 'vmdk'; 'target-disk'?: string } = {},
): Argv => ['qm', 'importdisk', vm(vmid), file, storage, ...options(opts)];

export const qmSet = (vmid: number, opts: QmSetOptions): Argv => ['qm', 'set', vm(vmid), ...options(opts)];

/** SIZE is `[+]<n>[KMGT]`: with `+` the disk grows by it, without it becomes that size. */
export const qmResize = (vmid: number, disk: string, size: string, opts: { skiplock?: boolean } = {}): Argv => {
  if (!/^\+?\d+(\.\d+)?[KMGT]?$/.test(size)) throw new Error(`invalid disk size: ${size}`);
  return ['qm', 'resize', vm(vmid), disk, size, ...options(opts)];
};

export interface QmMigrateOptions {
  online?: boolean;
  'with-local-disks'?: boolean;
  targetstorage?: string;
}

export const qmMigrate = (vmid: number, target: string, opts: QmMigrateOptions = {}): Argv => [
  'qm',
  'migrate',
  vm(vmid),
  target,
  ...options({ ...opts }),
];

/** Options of `qm clone` the service uses (qemu-server API2/Qemu.pm clone_vm). */
export interface QmCloneOptions {
  name?: string;
  description?: string;
  /** Absent: Proxmox's default, linked for a template and full for a VM. */
  full?: boolean;
  /** Full clones only: the storage of the new disks. */
  storage?: string;
  /** Full clones only. */
  format?: 'raw' | 'qcow2' | 'vmdk';
  /** Another node: the VM's disks must be on shared storage. */
  target?: string;
  pool?: string;
}

export const qmClone = (vmid: number, newid: number, opts: QmCloneOptions = {}): Argv => [
  'qm',
  'clone',
  vm(vmid),
  vm(newid),
  ...options({ name: opts.name, description: opts.description, full: opts.full, storage: opts.storage, format: opts.format, target: opts.target, pool: opts.pool }),
];

/**
 * `qm template`: the VM becomes a template, its disks base volumes. `disk`: only that disk
 * is converted, which a template allows (a conversion that failed after `template: 1`).
 */
export const qmTemplate = (vmid: number, opts: { disk?: string } = {}): Argv => ['qm', 'template', vm(vmid), ...options(opts)];

export const qmStart = (vmid: number, opts: { timeout?: number; skiplock?: boolean } = {}): Argv => [
  'qm',
  'start',
  vm(vmid),
  ...options(opts),
];

export const qmStop = (vmid: number, opts: { timeout?: number; skiplock?: boolean; 'overrule-shutdown'?: boolean } = {}): Argv => [
  'qm',
  'stop',
  vm(vmid),
  ...options(opts),
];

export const qmShutdown = (vmid: number, opts: { timeout?: number; forceStop?: boolean; skiplock?: boolean } = {}): Argv => [
  'qm',
  'shutdown',
  vm(vmid),
  ...options(opts),
];

export const qmReboot = (vmid: number, opts: { timeout?: number } = {}): Argv => ['qm', 'reboot', vm(vmid), ...options(opts)];

export const qmDestroy = (
  vmid: number,
  opts: { purge?: boolean; skiplock?: boolean; 'destroy-unreferenced-disks'?: boolean } = {},
): Argv => ['qm', 'destroy', vm(vmid), ...options(opts)];

export const qmConfig = (vmid: number, opts: { current?: boolean } = {}): Argv => ['qm', 'config', vm(vmid), ...options(opts)];

export const qmStatus = (vmid: number): Argv => ['qm', 'status', vm(vmid)];
/** `qm guest cmd <vmid> <command>` (PVE/CLI/qm.pm): a guest agent command without arguments; prints its result as JSON. */
export const qmGuestCmd = (vmid: number, command: 'network-get-interfaces'): Argv => ['qm', 'guest', 'cmd', vm(vmid), command];
export const qmCloudinitDump = (vmid: number, type: 'user' | 'network' | 'meta'): Argv => ['qm', 'cloudinit', 'dump', vm(vmid), type];

export const qmList = (): Argv => ['qm', 'list'];

/** `pvesh get <path> --output-format json`: the API's `data` member, keys sorted. */
export const pveshGet = (apiPath: string, params: Record<string, OptionValue> = {}): Argv => {
  if (!apiPath.startsWith('/')) throw new Error(`API path must start with '/': ${apiPath}`);
  return ['pvesh', 'get', apiPath, ...options(params), '--output-format', 'json'];
};

export const pveshNodes = (): Argv => pveshGet('/nodes');
export const pveshNodeStatus = (node: string): Argv => pveshGet(`/nodes/${encodeURIComponent(node)}/status`);
export const pveshClusterResources = (type?: 'vm' | 'storage' | 'node'): Argv => pveshGet('/cluster/resources', { type });
export const pveshNextId = (): Argv => pveshGet('/cluster/nextid');
/** The node's bridges, Linux and OVS (pve-manager PVE/API2/Network.pm `index`; any user may list them). */
export const pveshNodeBridges = (node: string): Argv => pveshGet(`/nodes/${encodeURIComponent(node)}/network`, { type: 'any_bridge' });
export const pveshVersion = (): Argv => pveshGet('/version');
/** pve-manager PVE/API2/Pool.pm `index`: `[{ poolid, comment? }]`. */
export const pveshPools = (): Argv => pveshGet('/pools');
/** qemu-server's API2/Qemu/Agent.pm `file-read` (`qm` has no such subcommand): a file of the guest, through its agent. */
export const pveshAgentFileRead = (node: string, vmid: number, file: string): Argv =>
  pveshGet(`/nodes/${encodeURIComponent(node)}/qemu/${vmid}/agent/file-read`, { file });

export const pvesmStatus = (opts: { storage?: string; content?: string; enabled?: boolean; target?: string } = {}): Argv => [
  'pvesm',
  'status',
  ...options(opts),
];

/**
 * `qm set` with its secrets read from stdin, so they are in neither the SSH command line
 * nor the argv of any shell. A fixed POSIX script (the only code here that a shell
 * interprets, and it contains no data) reads the password as the first stdin line and the
 * SSH keys as the rest into a fresh 0600 file from mktemp, runs `qm set` (its argv passed
 * as "$@") with `--cipassword "$pw"` and `--sshkeys <file>`, and removes the file on exit.
 * Real `qm set` takes the password only as an argument, so what travels is its SHA-256
 * crypt hash (./cipassword: what Proxmox would store anyway, and keeps as given): the plain
 * password is in no process's argv or stdin on the node, nor in our logs or errors. The
 * hash itself IS in the argv of `qm set` while it runs (readable in /proc by local users
 * of the node): no `qm` or `pvesh` option reads it from elsewhere. docs/security.md says so.
 */
export function qmSetWithSecrets(
  vmid: number,
  opts: QmSetOptions,
  secrets: { cipassword?: string; cipasswordHash?: string; sshkeys?: string },
): {
  argv: Argv;
  stdin: string;
  /** What to show in logs and errors instead of the script. */
  display: Argv;
  /** The crypt hash sent, if any. */
  hash?: string;
} {
  if (secrets.cipassword !== undefined && /[\r\n]/.test(secrets.cipassword)) throw new Error('cipassword cannot contain a line break');
  const hash = ciPasswordHashOf(secrets);
  const hasPassword = hash !== undefined;
  const hasKeys = secrets.sshkeys !== undefined;
  const script = [
    'umask 077',
    ...(hasPassword ? ['IFS= read -r pw || exit 1'] : []),
    ...(hasKeys ? ['keys=$(mktemp) || exit 1', `trap 'rm -f "$keys"' EXIT`, 'cat > "$keys" || exit 1'] : []),
    `"$@"${hasPassword ? ' --cipassword "$pw"' : ''}${hasKeys ? ' --sshkeys "$keys"' : ''}`,
  ].join('\n');
  const base = qmSet(vmid, opts);
  return {
    argv: ['sh', '-c', script, 'qm-set', ...base],
    stdin: `${hasPassword ? `${hash}\n` : ''}${secrets.sshkeys ?? ''}`,
    display: [...base, ...(hasPassword ? ['--cipassword', '<hidden>'] : []), ...(hasKeys ? ['--sshkeys', '<file>'] : [])],
    hash,
  };
}

/** A snippet volume QemuRun writes: `<storage>:snippets/<file>`, nothing a shell or a path could misread. */
const SNIPPET_VOLID = /^[a-z][a-z0-9\-_.]*[a-z0-9]:snippets\/[A-Za-z0-9][A-Za-z0-9._-]*\.yaml$/i;
const snippet = (volid: string): string => {
  if (!SNIPPET_VOLID.test(volid)) throw new Error(`invalid snippet volume: ${volid}`);
  return volid;
};

/** `pvesm path <volid>`: the file a volume is on this node (pve-storage `path`). */
export const pvesmPath = (volid: string): Argv => ['pvesm', 'path', volid];

/**
 * Snippets have no `qm`/`pvesh` command to write them (the API's upload takes iso, vztmpl
 * and import only), so these fixed scripts (no data in them) ask `pvesm path` where the
 * volume lives and write, read or remove that file. The content travels on stdin. Written
 * 0600 through a temporary file renamed into place: a start never reads half a snippet,
 * and user-data may hold secrets.
 */
export const snippetWrite = (volid: string): Argv => [
  'sh',
  '-c',
  ['set -e', 'p=$(pvesm path "$1")', 'umask 077', 'mkdir -p "$(dirname "$p")"', 'cat > "$p.tmp-qemurun"', 'mv -f "$p.tmp-qemurun" "$p"'].join('\n'),
  'qemurun-snippet',
  snippet(volid),
];

/** Prints the snippet; exit 3 when the file is not there. */
export const snippetRead = (volid: string): Argv => ['sh', '-c', 'set -e\np=$(pvesm path "$1")\n[ -f "$p" ] || exit 3\ncat "$p"', 'qemurun-snippet', snippet(volid)];

/** Removes the snippet; none there is no error. */
export const snippetRemove = (volid: string): Argv => ['sh', '-c', 'set -e\np=$(pvesm path "$1")\nrm -f "$p"', 'qemurun-snippet', snippet(volid)];
