import { isRetryableType } from '../../contract';

/**
 * What Proxmox's own error texts mean for a caller: retry (a lock held by another task
 * clears in seconds, a node comes back) or give up (a bad parameter stays bad). This file
 * is the one place that knows the texts. The class names are the ApplicationFailure types
 * Temporal sees; contract/failures.ts says which of them a retry can heal.
 */

/**
 * A command that ran on a node, or an API request (or its task), and failed. Secret values
 * never reach these fields.
 */
export interface CommandFailure {
  node: string;
  /** The argv as displayed, with secrets replaced; or `POST /nodes/pve1/qemu`. */
  command: string;
  /** The exit status; for an API request, its HTTP status. */
  exitCode: number;
  /** Set for API requests: the message reads "HTTP 403" rather than "exit 403". */
  http?: boolean;
  stderr: string;
  stdout?: string;
}

export abstract class ProxmoxError extends Error {
  readonly node: string;
  readonly command: string;
  readonly exitCode: number;
  readonly stderr: string;

  /** `message` replaces the command's for an answer that is no failed command (a cluster lookup). */
  constructor(failure: CommandFailure, message?: string) {
    super(message ?? `${failure.command} failed on node '${failure.node}' (${failure.http ? 'HTTP' : 'exit'} ${failure.exitCode}): ${reason(failure)}`);
    this.node = failure.node;
    this.command = failure.command;
    this.exitCode = failure.exitCode;
    this.stderr = failure.stderr;
  }

  /** Whether running the same command again may succeed (contract/failures.ts decides, by class name). */
  get retryable(): boolean {
    return isRetryableType(this.name);
  }
}

/** `VM is locked (<lock>)`: another task holds the VM; it clears when that task ends. */
export class VmLockedError extends ProxmoxError {
  override readonly name: string = 'VmLockedError';
  /** The lock value: create, migrate, backup, clone, snapshot, ... */
  get lock(): string | undefined {
    return /(?:VM|CT) is locked \(([^)]+)\)/.exec(this.stderr)?.[1];
  }
}

/** `can't lock file '/var/lock/qemu-server/lock-<id>.conf' - got timeout`. */
export class LockTimeoutError extends ProxmoxError {
  override readonly name: string = 'LockTimeoutError';
}

/**
 * pve-storage's storage lock (Plugin.pm `cluster_lock_storage`) not got within its 10 s:
 * `can't lock file '/var/lock/pve-manager/pve-storage-<id>' - got timeout` on a local
 * storage, `cfs-lock 'storage-<id>' error: got lock request timeout` on a shared one. Other
 * clones or template conversions on the storage held it; it clears when they end.
 */
export class StorageLockError extends ProxmoxError {
  override readonly name: string = 'StorageLockError';
  /** The storage whose lock timed out. */
  get storage(): string | undefined {
    return /pve-storage-([^'\s]+)' - got timeout|cfs-lock 'storage-([^']+)' error/.exec(this.stderr)?.slice(1).find((s) => s !== undefined);
  }
}

/**
 * `VM <id> already exists on node '<n>'`, `config file already exists`, pmxcfs's `close
 * (rename) atomic file '…/qemu-server/<id>.conf' failed: File exists`: the VMID belongs to
 * another guest.
 */
export class VmidTakenError extends ProxmoxError {
  override readonly name: string = 'VmidTakenError';
  /** The node the VMID lives on, when Proxmox named it. */
  get ownerNode(): string | undefined {
    return /already exists on node '([^']+)'/.exec(this.stderr)?.[1];
  }
}

/** `Configuration file 'nodes/<n>/qemu-server/<id>.conf' does not exist`: no such VM on this node. */
export class VmNotFoundError extends ProxmoxError {
  override readonly name: string = 'VmNotFoundError';

  /** No node holds the VM: the cluster's resources, read on `node`, list no QEMU VM `vmid`. */
  static notInCluster(vmid: number, node: string): VmNotFoundError {
    const message = `VM ${vmid} does not exist in the cluster`;
    return new VmNotFoundError({ node, command: 'cluster resources', exitCode: 0, stderr: message }, message);
  }
}

/** `400 Parameter verification failed.` and other refusals of the request itself. */
export class ParameterError extends ProxmoxError {
  override readonly name: string = 'ParameterError';
}

/**
 * `storage 'x' does not exist | is disabled | is not available on node 'n' | is not
 * configured for content-type 'import'`, `No such storage.`, ...
 */
export class StorageError extends ProxmoxError {
  override readonly name: string = 'StorageError';
}

/** `no such cluster node 'x'`. */
export class NoSuchNodeError extends ProxmoxError {
  override readonly name: string = 'NoSuchNodeError';

  /** CLI mode has no executor for the node (no NODE_<name>), so nothing can run there. */
  static notConfigured(node: string): NoSuchNodeError {
    const message = `node '${node}' is not configured`;
    return new NoSuchNodeError({ node, command: 'executor', exitCode: 0, stderr: message }, message);
  }
}

/**
 * `bridge 'vmbr9' does not exist`, printed by the tap's ifup script when the VM starts
 * (pve-common `PVE::Network::read_bridge_mtu`, via qemu-server's `pve-bridge`), followed by
 * `start failed: QEMU exited with code 1`. The node's network does not change by itself.
 */
export class BridgeNotFoundError extends ProxmoxError {
  override readonly name: string = 'BridgeNotFoundError';
  /** The bridge the node lacks. */
  readonly bridge: string | undefined;

  /**
   * `from` is where the VM's bridge came from: the VM_BRIDGE setting (the default), or the
   * `bridge` field of the install's request, which is what to change then.
   */
  constructor(
    private readonly failure: CommandFailure,
    from: 'setting' | 'request' = 'setting',
  ) {
    super(failure);
    // qm prints the ifup script's line on stdout, and its own error on stderr.
    this.bridge = /bridge '([^']+)' does not exist/.exec(`${failure.stderr}\n${failure.stdout ?? ''}`)?.[1];
    const change =
      from === 'setting'
        ? `set VM_BRIDGE to a bridge node '${failure.node}' has`
        : `name a bridge node '${failure.node}' has in the install's \`bridge\` field (or in the VM's net0)`;
    this.message += `; to fix: ${change}, or create '${this.bridge}' there (System → Network)`;
  }

  /** The same failure, its hint naming the request's `bridge` field instead of VM_BRIDGE. */
  fromRequest(): BridgeNotFoundError {
    return new BridgeNotFoundError(this.failure, 'request');
  }
}

/**
 * `netdev net0: MTU '9000' is bigger than the bridge MTU '1500' - adjust ...` (or smaller
 * than the IP minimum 576): qemu-server's print_netdevice_full refuses the start. The VM's
 * `mtu` came from the install's request; the node's bridge does not change by itself.
 */
export class NicMtuError extends ProxmoxError {
  override readonly name: string = 'NicMtuError';

  constructor(failure: CommandFailure) {
    super(failure);
    this.message += `; to fix: install with an \`mtu\` no larger than the bridge's MTU on node '${failure.node}' (or leave it out: the bridge's), or raise the bridge's MTU there`;
  }
}

/** The VM is in the wrong power state for the command (`VM 100 already running`, ...). */
export class VmStateError extends ProxmoxError {
  override readonly name: string = 'VmStateError';
}

/**
 * `Permission check failed (/vms/120, VM.Allocate)`: the API token lacks a privilege (or,
 * HTTP 401, is not valid at all). Retrying cannot grant it; the message names what is missing.
 */
export class PermissionDeniedError extends ProxmoxError {
  override readonly name: string = 'PermissionDeniedError';
  /** The privilege and the ACL path it is checked on, when Proxmox named them. */
  get missing(): { path: string; privilege: string } | undefined {
    const m = /Permission check failed \(([^,)]+), ([^)]+)\)/.exec(this.stderr);
    if (m) return { path: m[1], privilege: m[2] };
    // Added by the API client where Proxmox named none (lib/proxmox/api/privileges.ts).
    const lacks = /^the token lacks (.+) on (\S+)$/m.exec(this.stderr);
    return lacks ? { path: lacks[2], privilege: lacks[1] } : undefined;
  }
}

/** Any other failure. Unknown is treated as transient: better one retry too many. */
export class ProxmoxCommandError extends ProxmoxError {
  override readonly name: string = 'ProxmoxCommandError';
}

/**
 * Runs a start and reads `VM <id> already running` as the goal reached: a start retried
 * after a lost answer, or racing another, is no failure.
 */
export async function startOrFindRunning(start: () => Promise<unknown>): Promise<'started' | 'already-running'> {
  try {
    await start();
    return 'started';
  } catch (err) {
    if (err instanceof VmStateError && /VM \d+ already running/.test(err.stderr)) return 'already-running';
    throw err;
  }
}

type ErrorClass = new (failure: CommandFailure) => ProxmoxError;

/** First match wins; the order matters where one output holds two texts. */
const RULES: ReadonlyArray<readonly [RegExp, ErrorClass]> = [
  // The API's 403 and 401 (the status leads the text, as pvesh prints it). A refused
  // token is `401 Authentication failed!` (pve-manager PVE/HTTPServer.pm, auth_handler).
  [/^(?:40[13] )?(?:Permission check failed|authentication failure|Authentication failed!|No ticket)|^401 /im, PermissionDeniedError],
  // create/clone on a used VMID; `pvesh get /cluster/nextid --vmid N` on a used one. A
  // clone onto a VMID another node holds passes clone_vm's local check and fails when pmxcfs
  // refuses its config's rename (pve-cluster memdb.c memdb_rename: EEXIST).
  [/already exists on node '[^']*'|config file already exists|^vmid: VM \d+ already exists|^close \(rename\) atomic file '[^']*\/qemu-server\/\d+\.conf' failed: File exists$/m, VmidTakenError],
  [/Configuration file '[^']*' does not exist|unable to find configuration file for VM \d+/, VmNotFoundError],
  [/\b(?:VM|CT) is locked \([^)]*\)/, VmLockedError],
  // Before the VM config's lock: both are `can't lock file ... - got timeout`.
  [/can't lock file '\/var\/lock\/pve-manager\/pve-storage-[^']*' - got timeout|cfs-lock 'storage-[^']*' error: got lock request timeout/, StorageLockError],
  [/can't lock file '[^']*' - got timeout/, LockTimeoutError],
  [/no such cluster node '[^']*'/, NoSuchNodeError],
  [/^bridge '[^']*' does not exist$/m, BridgeNotFoundError],
  [/^netdev net\d+: MTU '\d+' is (?:bigger than the bridge MTU|smaller than the IP minimum MTU)/m, NicMtuError],
  [
    // download_url's content check and read_status' unknown storage (pve-storage
    // PVE/API2/Storage/Status.pm): a storage's configuration does not heal by itself.
    // clone_vm's storage checks: a linked clone needs its template's storage to clone, a
    // clone to another node shared storage.
    /storage '[^']*' (?:does not exist|is disabled|is not available on node|is not configured for content-type '[^']*')|storage \S+ does not support vm images|content type '[^']*' is not available on storage|^storage: No such storage\.|(?:Linked|Full) clone feature is not supported for '[^']*'|can't clone to non-shared storage '[^']*'|can't clone VM to node '[^']*' \(VM uses local storage\)/m,
    StorageError,
  ],
  [
    /VM \d+ already running|VM \d+ not running|VM \d+ is running - destroy failed|can't migrate running VM without --online|you can't start a vm if it's a template|VM is paused - cannot shutdown|you can't convert a template to a template|you can't convert a VM to template if VM is running/,
    VmStateError,
  ],
  [
    /^400 (?:Parameter verification failed|too many arguments|not enough arguments)|^no options specified|Only root may use this option|shrinking disks is not supported|you can't resize a cdrom|^disk '[^']*' (?:does not exist|has no associated volume)|non-existent or non-regular file|balloon value too large|parameter '(?:storage|format)' not allowed for linked clones/m,
    ParameterError,
  ],
];

/** Maps a failed command onto its error class by the text Proxmox printed. */
export function classifyFailure(failure: CommandFailure): ProxmoxError {
  const text = `${failure.stderr}\n${failure.stdout ?? ''}`;
  for (const [pattern, ErrorType] of RULES) {
    if (pattern.test(text)) return new ErrorType(failure);
  }
  return new ProxmoxCommandError(failure);
}

/** The lines that say why, without usage lines and blank lines; kept short for a UI. */
function reason(f: CommandFailure): string {
  const lines = f.stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^(?:qm|pvesh|pvesm) \S+.*\[OPTIONS\]$/.test(l));
  const text = lines.join('; ') || (f.stdout ?? '').trim().split('\n').slice(-1)[0] || 'no output';
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
