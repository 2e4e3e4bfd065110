import { displayCommand, type CommandResult, type NodeExecutor } from '../executor/types';
import * as cmd from './commands';
import { classifyFailure, startOrFindRunning } from './errors';
import {
  migrationOutput,
  parseCloudinitUserPassword,
  parseImportDisk,
  parsePvesmStatus,
  parseQmList,
  parseQmStatus,
  withTransferProgress,
  type MigrationLine,
  type QmListEntry,
  type StorageStatus,
  type TransferProgress,
  type VmRunState,
  poolIdsOf,
} from './parse';
import {
  parseAgentFileRead,
  bridgesOf,
  parsePveshJson,
  parseClusterResources,
  parseNextId,
  parseNodeStatus,
  parseNodes,
  parseResources,
  parseVersion,
  type PveVersion,
  type ClusterNode,
  type ClusterResourceByType,
  type NodeStatus,
} from './pvesh';
import type { VmConfig } from './vmConfig';
import { parseGuestInterfaces, type GuestInterface } from './guestAgent';
import { parseVmConfig } from './vmConfigText';
import type { CallOptions, ProxmoxNode, TaskOptions } from './node';

export type { CallOptions } from './node';

export interface ProxmoxNodeOptions {
  /** Reads (config, status, pvesh, pvesm). Default 60 s. */
  readTimeoutMs?: number;
  /** Changes that finish in seconds to minutes (create, set, start, destroy, ...). Default 10 min. */
  writeTimeoutMs?: number;
}

interface RunSpec extends CallOptions {
  stdin?: string;
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Shown in errors instead of the argv. */
  display?: readonly string[];
  /**
   * Values replaced by `<hidden>` in the output kept on errors. Only long values (crypt
   * hashes): replacing a short one would garble messages and tell where it occurs.
   */
  secrets?: string[];
  /** Default timeout for this call. */
  defaultTimeoutMs?: number;
}

/** Shorter values are not masked: see RunSpec.secrets. */
const MIN_MASKED_LENGTH = 16;

/**
 * A Proxmox node driven through its executor (locally or over root SSH): builds argv with
 * ./commands, parses with ./parse, ./pvesh and ./vmConfig, and throws the classes of
 * ./errors. A qm process is its own task, so TaskOptions' UPIDs do not apply here.
 */
export class CliNode implements ProxmoxNode {
  readonly mode = 'cli' as const;
  private readonly readTimeoutMs: number;
  private readonly writeTimeoutMs: number;

  constructor(
    readonly executor: NodeExecutor,
    options: ProxmoxNodeOptions = {},
  ) {
    this.readTimeoutMs = options.readTimeoutMs ?? 60_000;
    this.writeTimeoutMs = options.writeTimeoutMs ?? 600_000;
  }

  get node(): string {
    return this.executor.node;
  }

  // ---- VM lifecycle -------------------------------------------------------------------

  /** `qm create`. A used VMID throws VmidTakenError. */
  async createVm(vmid: number, options: cmd.QmCreateOptions, call: TaskOptions = {}): Promise<void> {
    await this.write(cmd.qmCreate(vmid, options), call);
  }

  /** `qm clone`. A used `newid` throws VmidTakenError; a storage lock timeout, StorageLockError. */
  async cloneVm(vmid: number, newid: number, opts: TaskOptions & cmd.QmCloneOptions = {}): Promise<void> {
    await this.write(cmd.qmClone(vmid, newid, opts), opts);
  }

  /**
   * `qm template`. A running VM or a template already throws VmStateError. qm.pm has no
   * exit handler for this task, so a conversion that fails (a storage lock's timeout)
   * still exits 0, with the task's error alone on stderr (the task's own output goes to
   * stdout): anything there but a warning count is that failure.
   */
  async convertToTemplate(vmid: number, call: TaskOptions & { disk?: string } = {}): Promise<void> {
    const argv = cmd.qmTemplate(vmid, { disk: call.disk });
    const result = await this.write(argv, call);
    const complaint = result.stderr.split('\n').filter((l) => l.trim() !== '' && !/^\s*(?:WARN(?:ING)?:|Task finished with \d+ warning)/.test(l));
    if (complaint.length > 0) {
      throw classifyFailure({ node: this.node, command: displayCommand(argv), exitCode: 0, stderr: result.stderr, stdout: result.stdout });
    }
  }

  /**
   * `qm importdisk`: copies an image file on this node into `storage` as a new volume of
   * the VM and returns its volume ID (`local-lvm:vm-100-disk-0`). `onProgress` gets every
   * output line, with the parsed numbers on `transferred X of Y (p%)` lines.
   */
  async importDisk(
    vmid: number,
    file: string,
    storage: string,
    opts: TaskOptions & {
      format?: 'raw' | 'qcow2' | 'vmdk';
      targetDisk?: string;
      onProgress?: (line: string, progress?: TransferProgress) => void;
    } = {},
  ): Promise<string> {
    const argv = cmd.qmImportDisk(vmid, file, storage, { format: opts.format, 'target-disk': opts.targetDisk });
    const { stdout } = await this.run(argv, { ...opts, onLine: withTransferProgress(opts.onProgress) });
    return parseImportDisk(stdout).volid;
  }

  /**
   * `qm set`. `sshkeys` (public keys, one per line) and the cloud-init password travel on
   * stdin: the keys reach qm as a 0600 temp file, as `--sshkeys` requires; the password
   * (`cipassword`, hashed here, or `cipasswordHash`, a hash kept from before) leaves as
   * its crypt hash only (see qmSetWithSecrets). The plain password never reaches the node,
   * so no output can hold it: nothing is substituted in messages on its account.
   */
  async setVmOptions(
    vmid: number,
    options: cmd.QmSetOptions & { sshkeys?: string; cipassword?: string; cipasswordHash?: string },
    call: CallOptions = {},
  ): Promise<void> {
    const { sshkeys, cipassword, cipasswordHash, ...rest } = options;
    if (sshkeys === undefined && cipassword === undefined && cipasswordHash === undefined) {
      await this.write(cmd.qmSet(vmid, rest), call);
      return;
    }
    const { argv, stdin, display, hash } = cmd.qmSetWithSecrets(vmid, rest, { sshkeys, cipassword, cipasswordHash });
    await this.write(argv, { ...call, stdin, display, secrets: hash ? [hash] : [] });
  }

  /**
   * The stored cloud-init password hash, from `qm cloudinit dump <vmid> user` (`qm config`
   * and the API show only `**********`); undefined when none is set.
   */
  async ciPasswordHash(vmid: number, call: CallOptions = {}): Promise<string | undefined> {
    return parseCloudinitUserPassword((await this.read(cmd.qmCloudinitDump(vmid, 'user'), call)).stdout);
  }

  /**
   * `qm resize`. Since qemu-server 8.0 a failed resize still exits 0 with the reason on
   * stderr, so stderr is checked even on success: anything but storage
   * warnings counts as failure.
   */
  async resize(vmid: number, disk: string, size: string, opts: CallOptions & { skiplock?: boolean } = {}): Promise<void> {
    const argv = cmd.qmResize(vmid, disk, size, { skiplock: opts.skiplock });
    const result = await this.write(argv, opts);
    const complaint = result.stderr
      .split('\n')
      .filter((l) => l.trim() !== '' && !/^\s*(?:WARN(?:ING)?:|Task finished with \d+ warning)/.test(l));
    if (complaint.length > 0) {
      throw classifyFailure({ node: this.node, command: displayCommand(argv), exitCode: 0, stderr: result.stderr, stdout: result.stdout });
    }
  }

  /**
   * `qm migrate` from this node to `target`. A stopped VM's local disks are always copied;
   * `withLocalDisks` is needed for a running one (`online`). Lines stream to `onLine`.
   */
  async migrate(
    vmid: number,
    target: string,
    opts: TaskOptions & {
      online?: boolean;
      withLocalDisks?: boolean;
      targetStorage?: string;
      onLine?: (line: string, parsed: MigrationLine) => void;
    } = {},
  ): Promise<{ durationSec?: number }> {
    const argv = cmd.qmMigrate(vmid, target, {
      online: opts.online,
      'with-local-disks': opts.withLocalDisks,
      targetstorage: opts.targetStorage,
    });
    const output = migrationOutput(opts.onLine);
    await this.run(argv, { ...opts, onLine: output.onLine });
    return output.result();
  }

  /** `qm start`. A VM that already runs is not an error: the goal is reached. */
  async start(vmid: number, opts: CallOptions & { timeout?: number; skiplock?: boolean } = {}): Promise<'started' | 'already-running'> {
    return startOrFindRunning(() => this.write(cmd.qmStart(vmid, { timeout: opts.timeout, skiplock: opts.skiplock }), opts));
  }

  /** `qm stop` (hard). A stopped VM is no error (qm exits 0). */
  async stop(vmid: number, opts: CallOptions & { timeout?: number; skiplock?: boolean; overruleShutdown?: boolean } = {}): Promise<void> {
    await this.write(cmd.qmStop(vmid, { timeout: opts.timeout, skiplock: opts.skiplock, 'overrule-shutdown': opts.overruleShutdown }), opts);
  }

  /** `qm shutdown` (ACPI). On a stopped VM qm only warns and exits 0. */
  async shutdown(vmid: number, opts: CallOptions & { timeout?: number; forceStop?: boolean; skiplock?: boolean } = {}): Promise<void> {
    await this.write(cmd.qmShutdown(vmid, { timeout: opts.timeout, forceStop: opts.forceStop, skiplock: opts.skiplock }), opts);
  }

  /** `qm reboot`. A stopped VM throws VmStateError. */
  async reboot(vmid: number, opts: CallOptions & { timeout?: number } = {}): Promise<void> {
    await this.write(cmd.qmReboot(vmid, { timeout: opts.timeout }), opts);
  }

  /** `qm destroy`, with `--purge` unless told otherwise. A running VM throws VmStateError. */
  async destroy(
    vmid: number,
    opts: CallOptions & { purge?: boolean; skiplock?: boolean; destroyUnreferencedDisks?: boolean } = {},
  ): Promise<void> {
    const argv = cmd.qmDestroy(vmid, {
      purge: opts.purge ?? true,
      skiplock: opts.skiplock,
      'destroy-unreferenced-disks': opts.destroyUnreferencedDisks,
    });
    await this.write(argv, opts);
  }

  // ---- reads ------------------------------------------------------------------------

  /** `qm config`: the VM must live on this node, or VmNotFoundError. */
  async config(vmid: number, opts: CallOptions & { current?: boolean } = {}): Promise<VmConfig> {
    const { stdout } = await this.read(cmd.qmConfig(vmid, { current: opts.current }), opts);
    return parseVmConfig(stdout);
  }

  /** `qm status`: running, stopped, or a QMP state. */
  async status(vmid: number, call: CallOptions = {}): Promise<VmRunState> {
    return parseQmStatus((await this.read(cmd.qmStatus(vmid), call)).stdout);
  }

  /** `qm list`: the VMs on this node. */
  async list(call: CallOptions = {}): Promise<QmListEntry[]> {
    return parseQmList((await this.read(cmd.qmList(), call)).stdout);
  }

  /** `pvesh get /nodes/<node>/qemu/<vmid>/agent/file-read --file <file>`. */
  async agentFileRead(vmid: number, file: string, call: CallOptions = {}): Promise<string> {
    return parseAgentFileRead((await this.read(cmd.pveshAgentFileRead(this.node, vmid, file), call)).stdout);
  }

  /** `qm guest cmd <vmid> network-get-interfaces`. */
  async agentNetworkInterfaces(vmid: number, call: CallOptions = {}): Promise<GuestInterface[]> {
    return parseGuestInterfaces((await this.read(cmd.qmGuestCmd(vmid, 'network-get-interfaces'), call)).stdout);
  }

  /** `pvesh get /nodes`: every cluster node and whether it is online. */
  async nodes(call: CallOptions = {}): Promise<ClusterNode[]> {
    return parseNodes((await this.read(cmd.pveshNodes(), call)).stdout);
  }

  /** `pvesh get /nodes/<node>/status`: CPU model and flags, memory, uptime. */
  async nodeStatus(node: string, call: CallOptions = {}): Promise<NodeStatus> {
    return parseNodeStatus((await this.read(cmd.pveshNodeStatus(node), call)).stdout);
  }

  /** `pvesh get /cluster/resources --type <type>`: cluster-wide VMs (with containers), nodes or storages. */
  async clusterResources<T extends keyof ClusterResourceByType>(type: T, call: CallOptions = {}): Promise<ClusterResourceByType[T][]> {
    return parseClusterResources((await this.read(cmd.pveshClusterResources(type), call)).stdout, type);
  }

  /** `pvesh get /version`: the Proxmox VE release of the node answering (this one). */
  async version(call: CallOptions = {}): Promise<PveVersion> {
    return parseVersion((await this.read(cmd.pveshVersion(), call)).stdout);
  }

  /** `pvesh get /cluster/resources`, read once and split by type. */
  async resources(call: CallOptions = {}): Promise<{ [T in keyof ClusterResourceByType]: ClusterResourceByType[T][] }> {
    return parseResources((await this.read(cmd.pveshClusterResources(), call)).stdout);
  }

  /** `pvesh get /nodes/<node>/network --type any_bridge`: the node's bridges. */
  async bridges(node: string, call: CallOptions = {}): Promise<string[]> {
    return bridgesOf(parsePveshJson((await this.read(cmd.pveshNodeBridges(node), call)).stdout));
  }

  /** `pvesh get /cluster/nextid`: the lowest free VMID. It reserves nothing. */
  async nextId(call: CallOptions = {}): Promise<number> {
    return parseNextId((await this.read(cmd.pveshNextId(), call)).stdout);
  }

  /** `pvesh get /pools`: the pools' ids. */
  async pools(call: CallOptions = {}): Promise<string[]> {
    return poolIdsOf(JSON.parse((await this.read(cmd.pveshPools(), call)).stdout || '[]'));
  }

  /** `pvesm status` on this node. */
  async storageStatus(opts: CallOptions & { storage?: string; content?: string; enabled?: boolean } = {}): Promise<StorageStatus[]> {
    const argv = cmd.pvesmStatus({ storage: opts.storage, content: opts.content, enabled: opts.enabled });
    return parsePvesmStatus((await this.read(argv, opts)).stdout);
  }

  // ---- cloud-init snippets ---------------------------------------------------------

  /** The content goes on stdin and is never in an error: user-data may hold secrets. */
  async writeSnippet(volid: string, content: string, call: CallOptions = {}): Promise<void> {
    await this.write(cmd.snippetWrite(volid), { ...call, stdin: content, display: ['write snippet', volid] });
  }

  async readSnippet(volid: string, call: CallOptions = {}): Promise<string | undefined> {
    const argv = cmd.snippetRead(volid);
    const result = await this.executor.run(argv, { signal: call.signal, timeoutMs: call.timeoutMs ?? this.readTimeoutMs });
    if (result.exitCode === 3) return undefined;
    if (result.exitCode === 0) return result.stdout;
    // Not through run(): its errors keep stdout, which would be the snippet.
    throw classifyFailure({ node: this.node, command: displayCommand(['read snippet', volid]), exitCode: result.exitCode, stderr: result.stderr, stdout: '' });
  }

  async removeSnippet(volid: string, call: CallOptions = {}): Promise<void> {
    await this.write(cmd.snippetRemove(volid), { ...call, display: ['remove snippet', volid] });
  }

  // ---- running ----------------------------------------------------------------------

  private read(argv: readonly string[], spec: RunSpec): Promise<CommandResult> {
    return this.run(argv, { defaultTimeoutMs: this.readTimeoutMs, ...spec });
  }

  private write(argv: readonly string[], spec: RunSpec): Promise<CommandResult> {
    return this.run(argv, { defaultTimeoutMs: this.writeTimeoutMs, ...spec });
  }

  /** Runs one command; a non-zero exit becomes the matching error class. */
  private async run(argv: readonly string[], spec: RunSpec): Promise<CommandResult> {
    const timeoutMs = spec.timeoutMs ?? spec.defaultTimeoutMs;
    const result = await this.executor.run(argv, {
      stdin: spec.stdin,
      onLine: spec.onLine,
      signal: spec.signal,
      timeoutMs: timeoutMs ? timeoutMs : undefined,
    });
    if (result.exitCode === 0) return result;
    const hide = (text: string) =>
      (spec.secrets ?? []).filter((s) => s.length >= MIN_MASKED_LENGTH).reduce((t, s) => t.split(s).join('<hidden>'), text);
    throw classifyFailure({
      node: this.node,
      command: displayCommand(spec.display ?? argv),
      exitCode: result.exitCode,
      stderr: hide(result.stderr),
      stdout: hide(result.stdout),
    });
  }
}
