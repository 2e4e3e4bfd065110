import type { GuestInterface } from './guestAgent';
import type { QmCloneOptions, QmCreateOptions, QmSetOptions } from './commands';
import type { MigrationLine, QmListEntry, StorageStatus, TransferProgress, VmRunState } from './parse';
import type { ClusterNode, ClusterResourceByType, NodeStatus, PveVersion } from './pvesh';
import type { VmConfig } from './vmConfig';

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the default for this kind of call; 0 means none. */
  timeoutMs?: number;
}

/**
 * Options of the operations that run as a Proxmox task (a UPID on the API; a qm process
 * on the CLI). A task outlives the worker that started it, so a caller that wrote the UPID
 * down (`onTask`) can hand it back (`resumeTask`) after a crash, and the call follows that
 * task to its end instead of starting the operation a second time. The CLI has no task to
 * follow: it ignores both and runs the command.
 */
export interface TaskOptions extends CallOptions {
  /** Called once with the UPID as soon as the task runs. */
  onTask?: (upid: string) => void;
  /** A UPID from an earlier attempt: follow it instead of starting anew. */
  resumeTask?: string;
  /**
   * Whether an abort of `signal` (given its reason) also stops the task on its node.
   * Default: no, the task runs on; a caller that gives up on the operation for good says yes.
   */
  stopTaskOnAbort?: (reason: unknown) => boolean;
}

export type ProxmoxMode = 'cli' | 'api';

/**
 * One Proxmox node, as the activities see it: typed calls in, typed values out, failures
 * as the classes of ./errors. Two implementations: ./cli (qm, pvesh and pvesm through a
 * node's executor) and ./api (the REST API with a token). `qm` acts on the node it runs
 * on, so a VM is handled through the ProxmoxNode of the node it lives on; cluster-wide
 * reads (resources, nodes, node status) answer from any node.
 */
export interface ProxmoxNode {
  readonly node: string;
  readonly mode: ProxmoxMode;

  /** Creates a VM (`qm create`, `POST /nodes/{node}/qemu`). A used VMID throws VmidTakenError. */
  createVm(vmid: number, options: QmCreateOptions, call?: TaskOptions): Promise<void>;
  /**
   * Clones a VM or template into `newid` (`qm clone`, `POST .../clone`, a task): linked
   * by default from a template (where its storage can: ./linkedClone), full from a VM
   * or with `full`. A used `newid` throws VmidTakenError; the storage's lock not got in
   * time (parallel clones), the retryable StorageLockError.
   */
  cloneVm(vmid: number, newid: number, opts?: TaskOptions & QmCloneOptions): Promise<void>;
  /**
   * Turns a stopped VM into a template (`qm template`, `POST .../template`), its disks into
   * base volumes; with `disk`, only that disk (a template's too). A running VM or a
   * template already (without `disk`) throws VmStateError; a conversion that fails throws
   * what its task failed with, though qm exits 0 then. Proxmox writes `template: 1` before
   * it converts the disks, so neither the answer nor the flag says the disks are base
   * volumes: the config does (lib/proxmox/baseVolume.ts).
   */
  convertToTemplate(vmid: number, call?: TaskOptions & { disk?: string }): Promise<void>;
  /**
   * Copies an image into `storage` as a new volume of the VM and returns its volume ID.
   * The CLI reads a file on this node and leaves the disk unused unless `targetDisk`;
   * the API imports a volume (`<storage>:import/<file>`) into `targetDisk` (default
   * scsi0), as `import-from` needs a drive to attach to.
   */
  importDisk(
    vmid: number,
    source: string,
    storage: string,
    opts?: TaskOptions & { format?: 'raw' | 'qcow2' | 'vmdk'; targetDisk?: string; onProgress?: (line: string, progress?: TransferProgress) => void },
  ): Promise<string>;
  /**
   * Sets options of the VM's configuration (`qm set`, `PUT .../config`). `sshkeys` (one per line) and the cloud-init password travel as secrets:
   * the password leaves the service only as its crypt hash (`cipassword` is hashed here,
   * `cipasswordHash` is one kept from before).
   */
  setVmOptions(
    vmid: number,
    options: QmSetOptions & { sshkeys?: string; cipassword?: string; cipasswordHash?: string },
    call?: CallOptions,
  ): Promise<void>;
  /** The stored cloud-init password hash (config shows only `**********`); undefined when none. */
  ciPasswordHash(vmid: number, call?: CallOptions): Promise<string | undefined>;
  /** Resize a disk to `size` (`32G`, `+4G`). Shrinking is a ParameterError. */
  resize(vmid: number, disk: string, size: string, opts?: TaskOptions & { skiplock?: boolean }): Promise<void>;
  /** Migrate from this node to `target`, lines streamed to `onLine`. */
  migrate(
    vmid: number,
    target: string,
    opts?: TaskOptions & { online?: boolean; withLocalDisks?: boolean; targetStorage?: string; onLine?: (line: string, parsed: MigrationLine) => void },
  ): Promise<{ durationSec?: number }>;
  /** A VM that already runs is not an error: the goal is reached. */
  start(vmid: number, opts?: TaskOptions & { timeout?: number; skiplock?: boolean }): Promise<'started' | 'already-running'>;
  /** Hard stop. A stopped VM is no error. */
  stop(vmid: number, opts?: TaskOptions & { timeout?: number; skiplock?: boolean; overruleShutdown?: boolean }): Promise<void>;
  /** ACPI shutdown. A stopped VM is no error. */
  shutdown(vmid: number, opts?: TaskOptions & { timeout?: number; forceStop?: boolean; skiplock?: boolean }): Promise<void>;
  /** A stopped VM throws VmStateError. */
  reboot(vmid: number, opts?: TaskOptions & { timeout?: number }): Promise<void>;
  /** Destroy, with purge unless told otherwise. A running VM throws VmStateError. */
  destroy(vmid: number, opts?: TaskOptions & { purge?: boolean; skiplock?: boolean; destroyUnreferencedDisks?: boolean }): Promise<void>;

  /**
   * A file of the running guest, read by its QEMU guest agent (`agent/file-read`:
   * VM.GuestAgent.FileRead on PVE 9, VM.Monitor on 8). Fails as Proxmox does when the
   * agent is not configured or not running, or the file cannot be opened.
   */
  agentFileRead(vmid: number, file: string, call?: CallOptions): Promise<string>;
  /**
   * The running guest's network interfaces, as its QEMU guest agent reports them
   * (`network-get-interfaces`: VM.GuestAgent.Audit on PVE 9, VM.Monitor on 8). Fails as
   * Proxmox does when the agent is not configured or not running.
   */
  agentNetworkInterfaces(vmid: number, call?: CallOptions): Promise<GuestInterface[]>;
  /** The VM must live on this node, or VmNotFoundError. */
  config(vmid: number, opts?: CallOptions & { current?: boolean }): Promise<VmConfig>;
  /** running, stopped, or a QMP state. */
  status(vmid: number, call?: CallOptions): Promise<VmRunState>;
  /** The VMs on this node. */
  list(call?: CallOptions): Promise<QmListEntry[]>;
  /** Every cluster node and whether it is online. */
  nodes(call?: CallOptions): Promise<ClusterNode[]>;
  /** CPU model and flags, memory, uptime of any node. */
  nodeStatus(node: string, call?: CallOptions): Promise<NodeStatus>;
  /** Cluster-wide VMs (with containers), nodes or storages. */
  clusterResources<T extends keyof ClusterResourceByType>(type: T, call?: CallOptions): Promise<ClusterResourceByType[T][]>;
  /** VMs, nodes and storages from one cluster-wide read. */
  resources(call?: CallOptions): Promise<{ [T in keyof ClusterResourceByType]: ClusterResourceByType[T][] }>;
  /** The lowest free VMID. It reserves nothing. */
  nextId(call?: CallOptions): Promise<number>;
  /** The bridges (Linux and OVS) a node's network configuration has. */
  bridges(node: string, call?: CallOptions): Promise<string[]>;
  /** Storages as this node sees them. */
  storageStatus(opts?: CallOptions & { storage?: string; content?: string; enabled?: boolean }): Promise<StorageStatus[]>;
  /** The Proxmox VE release of this node: `{ release: '8.4', version: '8.4.1' }`. */
  version(call?: CallOptions): Promise<PveVersion>;
  /** The cluster's resource pools the caller may see (`GET /pools`): their ids. */
  pools(call?: CallOptions): Promise<string[]>;

  /**
   * A cloud-init snippet (`<storage>:snippets/<file>`) on this node, for `cicustom`. Only
   * the CLI can: Proxmox's API uploads no snippets, so ./api throws ConfigError.
   */
  writeSnippet(volid: string, content: string, call?: CallOptions): Promise<void>;
  /** The snippet's text; undefined when the file is not on this node. */
  readSnippet(volid: string, call?: CallOptions): Promise<string | undefined>;
  /** Removes the snippet; none there is no error. */
  removeSnippet(volid: string, call?: CallOptions): Promise<void>;
}
