import type { QmCloneOptions, QmCreateOptions, QmSetOptions } from '../commands';
import { ciPasswordHashOf } from '../cipassword';
import { startOrFindRunning } from '../errors';
import type { CallOptions, ProxmoxNode, TaskOptions } from '../node';
import {
  migrationOutput,
  parseCloudinitUserPassword,
  withTransferProgress,
  type MigrationLine,
  type QmListEntry,
  type StorageStatus,
  type TransferProgress,
  type VmRunState,
  poolIdsOf,
} from '../parse';
import {
  agentFileOf,
  bridgesOf,
  clusterResourcesOf,
  nextIdOf,
  nodeStatusOf,
  nodesOf,
  num,
  resourcesOf,
  versionOf,
  type ClusterNode,
  type ClusterResourceByType,
  type NodeStatus,
  type PveVersion,
} from '../pvesh';
import { vmConfigOf, type VmConfig, type VmConfigValue } from '../vmConfig';
import type { Params, PveApi } from './http';
import { guestInterfacesOf, type GuestInterface } from '../guestAgent';
import { followTask, isUpid, taskFailed, taskStatus } from './tasks';

export interface StorageVolume {
  volid: string;
  content: string;
  format?: string;
  size?: number;
}

/**
 * A Proxmox node reached through the REST API with a token. Paths, parameters and answers
 * are those of the API (`/nodes/{node}/qemu/{vmid}/...`); an operation that forks a task
 * returns its UPID, which is followed to its end (./tasks), handed to `onTask` first so a
 * caller can find it again after a crash, and followed instead of started when given as
 * `resumeTask`.
 */
export class ApiNode implements ProxmoxNode {
  readonly mode = 'api' as const;

  constructor(
    readonly api: PveApi,
    readonly node: string,
    private readonly options: { pollMs?: number } = {},
  ) {}

  private vm(vmid: number, sub = ''): string {
    if (!Number.isInteger(vmid) || vmid < 1) throw new RangeError(`invalid VMID: ${vmid}`);
    return `/nodes/${encodeURIComponent(this.node)}/qemu/${vmid}${sub}`;
  }

  private get nodePath(): string {
    return `/nodes/${encodeURIComponent(this.node)}`;
  }

  /**
   * Starts an operation that may fork a task, or follows the task of an earlier attempt,
   * and waits for it. Answers that are no UPID (a synchronous call) return at once.
   */
  private async task(
    method: 'POST' | 'PUT' | 'DELETE',
    path: string,
    params: Params,
    opts: TaskOptions & { onLine?: (line: string) => void },
  ): Promise<void> {
    const command = `${method} ${path}`;
    let upid = opts.resumeTask;
    // A recorded task that failed was the end of the attempt that started it (reported, or
    // lost with its worker): this attempt starts the operation anew.
    if (upid && taskFailed(await taskStatus(this.api, upid, opts.signal))) upid = undefined;
    if (!upid) {
      const data = await this.api.request(method, path, ApiNode.noSkiplock(params), { node: this.node, signal: opts.signal, timeoutMs: opts.timeoutMs });
      if (!isUpid(data)) return;
      upid = data;
    }
    opts.onTask?.(upid);
    await followTask(this.api, upid, { onLine: opts.onLine, signal: opts.signal, command, pollMs: this.options.pollMs, stopTaskOnAbort: opts.stopTaskOnAbort });
  }

  /**
   * `skiplock` is root@pam's alone (qemu-server answers anyone else `Only root may use
   * this option`), and a token is never root@pam: it is left out, and a lock stays a lock.
   */
  private static noSkiplock(params: Params): Params {
    const { skiplock, ...rest } = params;
    void skiplock;
    return rest;
  }

  private get<T>(path: string, params: Params = {}, call: CallOptions = {}): Promise<T> {
    return this.api.request<T>('GET', path, params, { node: this.node, signal: call.signal, timeoutMs: call.timeoutMs });
  }

  // ---- VM lifecycle -------------------------------------------------------------------

  async createVm(vmid: number, options: QmCreateOptions, call: TaskOptions = {}): Promise<void> {
    await this.task('POST', `${this.nodePath}/qemu`, { vmid, ...options }, call);
  }

  /** `POST .../clone`: clone_vm answers its early checks itself, then runs a qmclone task. */
  async cloneVm(vmid: number, newid: number, opts: TaskOptions & QmCloneOptions = {}): Promise<void> {
    const { name, description, full, storage, format, target, pool } = opts;
    await this.task('POST', this.vm(vmid, '/clone'), { newid, name, description, full, storage, format, target, pool }, opts);
  }

  /** `POST .../template`: a qmtemplate task, which fails after it wrote `template: 1` when a disk's conversion fails. */
  async convertToTemplate(vmid: number, call: TaskOptions & { disk?: string } = {}): Promise<void> {
    await this.task('POST', this.vm(vmid, '/template'), { disk: call.disk }, call);
  }

  /**
   * `import-from`: the volume (`<storage>:import/<file>`, or another VM's disk) is copied
   * into a new disk on `storage` attached at `targetDisk`. Progress lines of the task log
   * reach `onProgress`.
   */
  async importDisk(
    vmid: number,
    source: string,
    storage: string,
    opts: TaskOptions & { format?: 'raw' | 'qcow2' | 'vmdk'; targetDisk?: string; onProgress?: (line: string, progress?: TransferProgress) => void } = {},
  ): Promise<string> {
    const target = opts.targetDisk ?? 'scsi0';
    const drive = `${storage}:0,import-from=${source}${opts.format ? `,format=${opts.format}` : ''}`;
    await this.task('POST', this.vm(vmid, '/config'), { [target]: drive }, { ...opts, onLine: withTransferProgress(opts.onProgress) });
    const disk = (await this.config(vmid)).disks.find((d) => d.key === target);
    if (!disk) throw new Error(`VM ${vmid} has no ${target} after importing ${source}`);
    return disk.volid;
  }

  /**
   * `PUT .../config`. The API wants `sshkeys` URI-encoded (it stores them so); the password
   * goes as its crypt hash, which qemu-server keeps as given.
   */
  async setVmOptions(
    vmid: number,
    options: QmSetOptions & { sshkeys?: string; cipassword?: string; cipasswordHash?: string },
    call: CallOptions = {},
  ): Promise<void> {
    const { sshkeys, cipassword, cipasswordHash, ...rest } = options;
    const hash = ciPasswordHashOf({ cipassword, cipasswordHash });
    await this.api.request('PUT', this.vm(vmid, '/config'), {
      ...ApiNode.noSkiplock(rest),
      ...(sshkeys !== undefined ? { sshkeys: encodeURIComponent(sshkeys) } : {}),
      ...(hash !== undefined ? { cipassword: hash } : {}),
    }, { node: this.node, signal: call.signal, timeoutMs: call.timeoutMs });
  }

  async ciPasswordHash(vmid: number, call: CallOptions = {}): Promise<string | undefined> {
    return parseCloudinitUserPassword(String((await this.get(this.vm(vmid, '/cloudinit/dump'), { type: 'user' }, call)) ?? ''));
  }

  /** `PUT .../resize`: a task since qemu-server 8, a plain answer before. */
  async resize(vmid: number, disk: string, size: string, opts: TaskOptions & { skiplock?: boolean } = {}): Promise<void> {
    await this.task('PUT', this.vm(vmid, '/resize'), { disk, size, skiplock: opts.skiplock }, opts);
  }

  async migrate(
    vmid: number,
    target: string,
    opts: TaskOptions & { online?: boolean; withLocalDisks?: boolean; targetStorage?: string; onLine?: (line: string, parsed: MigrationLine) => void } = {},
  ): Promise<{ durationSec?: number }> {
    const output = migrationOutput(opts.onLine);
    await this.task(
      'POST',
      this.vm(vmid, '/migrate'),
      { target, online: opts.online, 'with-local-disks': opts.withLocalDisks, targetstorage: opts.targetStorage },
      { ...opts, onLine: output.onLine },
    );
    return output.result();
  }

  async start(vmid: number, opts: TaskOptions & { timeout?: number; skiplock?: boolean } = {}): Promise<'started' | 'already-running'> {
    return startOrFindRunning(() => this.task('POST', this.vm(vmid, '/status/start'), { timeout: opts.timeout, skiplock: opts.skiplock }, opts));
  }

  async stop(vmid: number, opts: TaskOptions & { timeout?: number; skiplock?: boolean; overruleShutdown?: boolean } = {}): Promise<void> {
    await this.task('POST', this.vm(vmid, '/status/stop'), { timeout: opts.timeout, skiplock: opts.skiplock, 'overrule-shutdown': opts.overruleShutdown }, opts);
  }

  async shutdown(vmid: number, opts: TaskOptions & { timeout?: number; forceStop?: boolean; skiplock?: boolean } = {}): Promise<void> {
    await this.task('POST', this.vm(vmid, '/status/shutdown'), { timeout: opts.timeout, forceStop: opts.forceStop, skiplock: opts.skiplock }, opts);
  }

  async reboot(vmid: number, opts: TaskOptions & { timeout?: number } = {}): Promise<void> {
    await this.task('POST', this.vm(vmid, '/status/reboot'), { timeout: opts.timeout }, opts);
  }

  async destroy(vmid: number, opts: TaskOptions & { purge?: boolean; skiplock?: boolean; destroyUnreferencedDisks?: boolean } = {}): Promise<void> {
    await this.task(
      'DELETE',
      this.vm(vmid),
      { purge: opts.purge ?? true, skiplock: opts.skiplock, 'destroy-unreferenced-disks': opts.destroyUnreferencedDisks },
      opts,
    );
  }

  // ---- reads ------------------------------------------------------------------------

  /**
   * `GET .../config`: the entries `qm config` prints, as JSON (the description plain text,
   * `sshkeys` URI-escaped as stored), plus the `digest` qm leaves out, which is left out
   * here too.
   */
  async config(vmid: number, opts: CallOptions & { current?: boolean } = {}): Promise<VmConfig> {
    const data = await this.get<Record<string, unknown>>(this.vm(vmid, '/config'), { current: opts.current }, opts);
    const entries: Record<string, VmConfigValue> = {};
    for (const [key, value] of Object.entries(data ?? {})) {
      if (key === 'digest') continue;
      if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) entries[key] = value;
    }
    return vmConfigOf(entries);
  }

  async agentFileRead(vmid: number, file: string, call: CallOptions = {}): Promise<string> {
    return agentFileOf(await this.get(this.vm(vmid, '/agent/file-read'), { file }, call));
  }

  async agentNetworkInterfaces(vmid: number, call: CallOptions = {}): Promise<GuestInterface[]> {
    return guestInterfacesOf(await this.get(this.vm(vmid, '/agent/network-get-interfaces'), {}, call));
  }

  async status(vmid: number, call: CallOptions = {}): Promise<VmRunState> {
    const data = await this.get<{ status?: string }>(this.vm(vmid, '/status/current'), {}, call);
    if (typeof data?.status !== 'string') throw new Error(`unexpected status answer for VM ${vmid}`);
    return data.status;
  }

  async list(call: CallOptions = {}): Promise<QmListEntry[]> {
    const data = await this.get<Array<Record<string, unknown>>>(`${this.nodePath}/qemu`, {}, call);
    return (data ?? []).map((v) => ({
      vmid: num(v.vmid) ?? 0,
      name: typeof v.name === 'string' ? v.name : '',
      status: typeof v.status === 'string' ? v.status : 'unknown',
      memoryMb: Math.round((num(v.maxmem) ?? 0) / 1024 ** 2),
      bootDiskGb: Number(((num(v.maxdisk) ?? 0) / 1024 ** 3).toFixed(2)),
      pid: num(v.pid) ?? 0,
    }));
  }

  async nodes(call: CallOptions = {}): Promise<ClusterNode[]> {
    return nodesOf(await this.get('/nodes', {}, call));
  }

  async nodeStatus(node: string, call: CallOptions = {}): Promise<NodeStatus> {
    return nodeStatusOf(await this.get(`/nodes/${encodeURIComponent(node)}/status`, {}, call));
  }

  async clusterResources<T extends keyof ClusterResourceByType>(type: T, call: CallOptions = {}): Promise<ClusterResourceByType[T][]> {
    return clusterResourcesOf(await this.get('/cluster/resources', { type }, call), type);
  }

  async resources(call: CallOptions = {}): Promise<{ [T in keyof ClusterResourceByType]: ClusterResourceByType[T][] }> {
    return resourcesOf(await this.get('/cluster/resources', {}, call));
  }

  /** `GET /nodes/{node}/network?type=any_bridge`: the node's bridges. */
  async bridges(node: string, call: CallOptions = {}): Promise<string[]> {
    return bridgesOf(await this.get(`/nodes/${encodeURIComponent(node)}/network`, { type: 'any_bridge' }, call));
  }

  async nextId(call: CallOptions = {}): Promise<number> {
    return nextIdOf(await this.get('/cluster/nextid', {}, call));
  }

  /**
   * Snippets: Proxmox's API writes none (`upload` and `download-url` take iso, vztmpl and
   * import only; pve-manager API2/Storage/Status.pm), and API mode reaches no node over SSH.
   * The API refuses `userData` in this mode before an install starts (docs/proxmox-api.md).
   */
  async writeSnippet(volid: string): Promise<void> {
    throw new Error(`cannot write the cloud-init snippet ${volid}: Proxmox's API uploads no snippets (use CLI mode)`);
  }

  async readSnippet(volid: string): Promise<string | undefined> {
    throw new Error(`cannot read the cloud-init snippet ${volid}: Proxmox's API reads no snippets (use CLI mode)`);
  }

  async removeSnippet(volid: string): Promise<void> {
    throw new Error(`cannot remove the cloud-init snippet ${volid}: Proxmox's API removes no snippets through QemuRun (use CLI mode, or remove it on the node)`);
  }

  /** `GET /pools`: the pools' ids (only those the token may see, as Proxmox filters them). */
  async pools(call: CallOptions = {}): Promise<string[]> {
    return poolIdsOf(await this.get('/pools', {}, call));
  }

  /**
   * `GET /nodes/{node}/storage`, or `/storage/{storage}/status` for one storage (as
   * `pvesm status --storage`, a storage that does not exist is a StorageError): sizes in
   * bytes, `active`/`enabled` as 0/1.
   */
  async storageStatus(opts: CallOptions & { storage?: string; content?: string; enabled?: boolean } = {}): Promise<StorageStatus[]> {
    const data = opts.storage
      ? [{ storage: opts.storage, ...(await this.get<Record<string, unknown>>(`${this.nodePath}/storage/${encodeURIComponent(opts.storage)}/status`, {}, opts)) }]
      : await this.get<Array<Record<string, unknown>>>(`${this.nodePath}/storage`, { content: opts.content, enabled: opts.enabled }, opts);
    return (data ?? []).map((s) => {
      const total = num(s.total) ?? 0;
      const used = num(s.used) ?? 0;
      const enabled = num(s.enabled) !== 0;
      return {
        name: String(s.storage ?? ''),
        type: String(s.type ?? ''),
        status: !enabled ? 'disabled' : num(s.active) === 1 ? 'active' : 'inactive',
        totalBytes: total,
        usedBytes: used,
        availableBytes: num(s.avail) ?? 0,
        ...(enabled && total > 0 ? { usedPercent: Number(((used / total) * 100).toFixed(2)) } : {}),
      };
    });
  }

  async version(call: CallOptions = {}): Promise<PveVersion> {
    // This node's: `/version` is the version of whichever node serves the request (the one
    // PROXMOX_API_URL reaches), `/nodes/{node}/version` the named node's (pve-manager
    // PVE/API2/Nodes.pm, `version`, proxied to the node; any authenticated user may ask).
    return versionOf(await this.get(`/nodes/${encodeURIComponent(this.node)}/version`, {}, call));
  }

  // ---- images fetched by the node (API only) ----------------------------------------

  /** `GET /nodes/{node}/storage/{storage}/content`: the volumes of one content type. */
  async storageContent(storage: string, content: string, call: CallOptions = {}): Promise<StorageVolume[]> {
    const data = await this.get<Array<Record<string, unknown>>>(`${this.nodePath}/storage/${encodeURIComponent(storage)}/content`, { content }, call);
    return (data ?? []).map((v) => ({
      volid: String(v.volid ?? ''),
      content: String(v.content ?? ''),
      ...(typeof v.format === 'string' ? { format: v.format } : {}),
      ...(num(v.size) !== undefined ? { size: num(v.size) } : {}),
    }));
  }

  /**
   * `POST /nodes/{node}/storage/{storage}/download-url` (content `import` since PVE 8.4):
   * the node fetches `url` itself, checks it against `checksum`, and keeps it as
   * `<storage>:import/<filename>`, which this returns.
   */
  async downloadUrl(
    storage: string,
    file: { url: string; filename: string; content: 'import' | 'iso' | 'vztmpl'; checksum?: string; algorithm?: string },
    opts: TaskOptions & { onLine?: (line: string) => void } = {},
  ): Promise<string> {
    await this.task(
      'POST',
      `${this.nodePath}/storage/${encodeURIComponent(storage)}/download-url`,
      {
        url: file.url,
        filename: file.filename,
        content: file.content,
        checksum: file.checksum,
        'checksum-algorithm': file.checksum ? file.algorithm : undefined,
      },
      opts,
    );
    return `${storage}:${file.content}/${file.filename}`;
  }
}
