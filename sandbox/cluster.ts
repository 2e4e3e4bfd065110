import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './state/paths';
import { configureStorages, DEFAULT_PVE_VERSION, defaultModel, stockStorages, loadModel, saveModel, type ClusterModel, type GuestFault, type GuestKind, type PoolDef } from './state/model';
import { startArchiveProxy, type ArchiveProxy } from './qemu/archiveProxy';
import { addFault, clearFaults, type FaultSpec } from './state/faults';
import { readCalls } from './state/callLog';
import { listVms } from './state/vmlist';
import { holdLock, readIfExists } from './state/files';
import { vmLockFile } from './cli/qm/vm';
import { clearVmProcess, runningVmids, signalVm } from './state/runtime';
import { startNodeSshd, type NodeSshd } from './nodeSshd';
import { sandboxSourceDir } from './location';
import { startCliServer } from './cliServer';
import { sandboxNiceness } from './priority';
import { startApiServer, type SandboxApi, type SandboxApiOptions } from './api/start';
import { addToken, addUser, authHeader, type AclEntry } from './api/access';
import { killRunningTasks } from './api/tasks';

/**
 * A stand-in Proxmox VE cluster on this machine: its state in one directory (laid out
 * like pmxcfs), `qm`/`pvesh`/`pvesm` in `binDir`, a real OpenSSH server per node (root,
 * key only) and, for each started VM, a process that serves real SSH on its loopback
 * address. Used by tests and by the service when no Proxmox is configured.
 */
export interface SandboxClusterOptions {
  dir: string;
  /** Default ['pve1', 'pve2']; pve2 has the older CPU (x86-64-v2-AES), the rest x86-64-v3. */
  nodes?: string[];
  mainNode?: string;
  /** Default 127.0.0.1. Must be a loopback address: VM n listens on `<first three octets>.n`. */
  gateway?: string;
  vmSshPort: number;
  /** Time from `qm start` to the guest's sshd answering; default 1000 ms. */
  bootDelayMs?: number;
  /** Lines the guests' apt-get/dnf print per call (default 0), for output-streaming tests. */
  packageOutputLines?: number;
  /** Silence of a guest's first apt-get/dnf call (a slow mirror), in ms; default 0. */
  packageSilenceMs?: number;
  /** Node sshd ports: base + index of the node in `nodes`. */
  sshPortBase: number;
  /** OpenSSH public key allowed as root on the node sshds. */
  rootAuthorizedKey: string;
  /** The node sshd binary; default /usr/sbin/sshd. */
  sshdPath?: string;
  /**
   * The Proxmox VE release the cluster plays, `pve-manager/<version>/<repoid>`; default
   * 9.1.1, and `PVE_RELEASES['8.4']` plays 8.4.1 (state/model.ts): its privileges, `pveum`'s
   * checks of them and the guest agent's permission checks are 8's. An 8.3 refuses
   * download-url's `content=import`, as the real one does.
   */
  pveVersion?: string;
  /**
   * Serve Proxmox's REST API (`/api2/json`) over HTTPS too, on the same state as the CLIs
   * (sandbox/api/). Off unless given; `true` = defaults (127.0.0.1, a free port).
   */
  api?: SandboxApiOptions | boolean;
  /**
   * pve-manager versions of nodes that do not run the cluster's `pveVersion`, e.g.
   * `{ pve2: '7.4-3' }`: a node left behind by an upgrade. Applied at every start.
   */
  pveVersions?: Record<string, string>;
  /**
   * What a started VM runs: `process` (default) or `qemu`, a real QEMU booting the VM's
   * disk (sandbox/qemu/). With `qemu` the storages keep real volume contents.
   */
  guests?: GuestKind;
  /** Real guests' package archive, reached through the archive proxy; default http://deb.debian.org. */
  guestArchive?: string;
  /** Real guests' accelerator: `kvm` only where a probe booted a guest (qemu/accel.ts); default tcg. */
  accel?: 'kvm' | 'tcg';
  /**
   * Storage content other than the installer's (model.ts `stockStorages`), as `pvesm set
   * <id> --content …` sets it, e.g. `{ local: ['backup', 'images', 'import', 'iso', 'vztmpl'] }`.
   * Applied at every start: a storage not named here has its stock content.
   */
  storageContent?: Record<string, string[]>;
  /**
   * Resource pools the cluster has (`pveum pool add <id>`), e.g. `['prod', 'lab']`; none on
   * a fresh install. Applied at every start; VMs created with `--pool` become members.
   */
  pools?: Array<string | PoolDef>;
  /**
   * The Linux bridges of nodes that have more than the installer's `vmbr0`, e.g.
   * `{ pve1: ['vmbr0', 'vmbr1'] }`. Applied at every start, as storageContent is.
   */
  bridges?: Record<string, string[]>;
  /** How long a call waits for a VM's config lock (PVE's `lock_config`: 10 s, the default). */
  lockTimeoutMs?: number;
  /**
   * How long a new VM shows as `unknown` in `/cluster/resources`, until pvestatd's next
   * report (PVE: up to 10 s); default 0, at once.
   */
  statusLagMs?: number;
}

/** A token `createApiToken` made: its id, secret and the header that sends it. */
export interface SandboxApiToken {
  tokenid: string;
  secret: string;
  /** `PVEAPIToken=<tokenid>=<secret>` */
  authorization: string;
}

export interface SandboxCall {
  node: string;
  argv: string[];
  exitCode: number;
}

export interface SandboxCluster {
  dir: string;
  binDir: string;
  mainNode: string;
  /** env to give a local process so that qm/pvesh/pvesm resolve to the sandbox for `node` */
  envFor(node: string): Record<string, string>;
  /**
   * Management address of each node: its sshd (`127.0.0.1:<sshPortBase + index>`). The main
   * node has one too, so a deployment off the cluster can reach it; a service running "on"
   * the main node runs its commands locally with `envFor(mainNode)` instead.
   */
  nodeAddresses: Record<string, { host: string; port: number }>;
  /** The pid of each node's sshd. */
  sshdPids: Record<string, number>;
  /** The REST API server, when started with `api`. */
  api?: SandboxApi;
  /**
   * Adds a user (`pveum user add`) with these ACL entries, e.g.
   * `{ userid: 'qemurun@pve', acl: [{ path: '/', privs: ['PVEVMAdmin'] }] }`.
   */
  createApiUser(u: { userid: string; acl?: AclEntry[] }): void;
  /**
   * Adds an API token of an existing user (privilege-separated unless `privsep: false`)
   * with these ACL entries, e.g. `{ tokenid: 'qemurun@pve!ci', acl: [{ path: '/', privs:
   * ['VM.Audit'] }] }`. A privilege-separated token has what both its ACL and its user's
   * grant; one without privilege separation has its user's privileges.
   */
  createApiToken(t: { tokenid: string; secret?: string; privsep?: boolean; acl?: AclEntry[]; expire?: number }): SandboxApiToken;
  injectFault(f: FaultSpec): Promise<void>;
  clearFaults(): Promise<void>;
  /**
   * Takes VM `vmid`'s config lock as another task on its node would, until `release()`:
   * meanwhile qm calls on that VM wait for it and fail `can't lock file … - got timeout`.
   */
  holdVmLock(vmid: number): { release(): void };
  /**
   * What goes wrong inside VM `vmid` from its next boot on (`undefined` clears it): a guest
   * that never answers SSH, or whose package manager fails (an init script exiting non-zero).
   */
  setGuestFault(vmid: number, fault: GuestFault | undefined): void;
  calls(): Promise<SandboxCall[]>;
  /** Raw conf file text, from whichever node holds the VM. */
  readConfig(vmid: number): Promise<string | undefined>;
  /** The VM's privileged.log: what its privileged tools were asked to do. */
  guestLog(vmid: number): Promise<string>;
  /**
   * Kills node sshds and, unless `keepVms`, VM processes; the state directory stays. The
   * service keeps VMs running across its own restarts, as a real cluster does: a later
   * start over the same directory finds them running.
   */
  stop(opts?: { keepVms?: boolean }): Promise<void>;
}

const NODE_HOST = '127.0.0.1';

function checkOptions(o: SandboxClusterOptions, nodes: string[], mainNode: string, gateway: string): void {
  if (!/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(gateway)) {
    throw new Error(`sandbox gateway must be a loopback address (127.0.0.0/8), got '${gateway}'`);
  }
  if (!nodes.includes(mainNode)) throw new Error(`main node '${mainNode}' is not one of ${nodes.join(', ')}`);
  for (const n of nodes) if (!/^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$/.test(n)) throw new Error(`invalid node name '${n}'`);
  for (const [n, v] of Object.entries(o.pveVersions ?? {})) {
    if (!nodes.includes(n)) throw new Error(`pveVersions names '${n}', which is not one of ${nodes.join(', ')}`);
    if (!/^\d+\.\d+[.-]\d+$/.test(v)) throw new Error(`pveVersions: '${v}' is not a pve-manager version like 8.3.2 or 7.4-3`);
  }
  if (!o.rootAuthorizedKey.trim()) throw new Error('rootAuthorizedKey is required');
}

/**
 * Starts (or restarts over an existing directory: VMs and configs are kept) a sandbox
 * cluster. VMs of a previous run that are still running (their processes are detached)
 * stay running; those that died are not restarted.
 */
export async function startSandboxCluster(opts: SandboxClusterOptions): Promise<SandboxCluster> {
  const dir = path.resolve(opts.dir);
  const nodes = opts.nodes ?? ['pve1', 'pve2'];
  const mainNode = opts.mainNode ?? nodes[0];
  const gateway = opts.gateway ?? '127.0.0.1';
  checkOptions(opts, nodes, mainNode, gateway);
  const paths = clusterPaths(dir);
  const binDir = path.join(sandboxSourceDir(), 'bin');

  const settings = {
    mainNode,
    gateway,
    vmSshPort: opts.vmSshPort,
    bootDelayMs: opts.bootDelayMs ?? 1000,
    packageOutputLines: opts.packageOutputLines ?? 0,
    packageSilenceMs: opts.packageSilenceMs ?? 0,
    // The release is the code's, not the state's: a restart over an older directory plays it.
    pveVersion: opts.pveVersion ?? DEFAULT_PVE_VERSION,
    guests: opts.guests ?? 'process',
    accel: opts.accel ?? 'tcg',
    lockTimeoutMs: opts.lockTimeoutMs ?? 10_000,
    statusLagMs: opts.statusLagMs ?? 0,
  };
  if (!/^pve-manager\/\d+\.\d+\.\d+\/[0-9a-f]+$/.test(settings.pveVersion)) throw new Error(`pveVersion must look like ${DEFAULT_PVE_VERSION}, got '${settings.pveVersion}'`);
  let model: ClusterModel;
  if (fs.existsSync(paths.clusterJson)) {
    model = { ...loadModel(dir), ...settings };
  } else {
    model = { ...defaultModel({ ...settings, nodes, nodeHost: NODE_HOST }), guests: settings.guests, accel: settings.accel, lockTimeoutMs: settings.lockTimeoutMs, statusLagMs: settings.statusLagMs };
  }
  model.storages = configureStorages(stockStorages(), opts.storageContent);
  model.pools = (opts.pools ?? []).map((p) => (typeof p === 'string' ? { poolid: p } : p));
  for (const n of model.nodes) {
    const version = opts.pveVersions?.[n.name];
    if (version) n.pveVersion = version;
    else delete n.pveVersion;
    const bridges = opts.bridges?.[n.name];
    if (bridges) n.bridges = [...bridges];
    else delete n.bridges;
  }
  saveModel(dir, model);
  for (const n of model.nodes) fs.mkdirSync(paths.qemuDir(n.name), { recursive: true });
  fs.mkdirSync(paths.runDir, { recursive: true });
  const archive: ArchiveProxy | undefined =
    model.guests === 'qemu' ? await startArchiveProxy(paths.archiveSocket, opts.guestArchive ?? 'http://deb.debian.org') : undefined;

  const envFor = (node: string): Record<string, string> => {
    if (!model.nodes.some((n) => n.name === node)) throw new Error(`no sandbox node '${node}'`);
    return {
      PATH: `${binDir}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
      PVE_SANDBOX_DIR: dir,
      PVE_SANDBOX_NODE: node,
      PVE_SANDBOX_NODEJS: process.execPath,
      // What a VM started by a CLI that runs as its caller's child (qm reboot) is lowered to.
      PVE_SANDBOX_NICENESS: String(sandboxNiceness()),
    };
  };

  // Every qm/pvesh/pvesm call of this cluster, local or over SSH, is answered by it.
  const cliServer = await startCliServer(sandboxSourceDir(), dir, envFor(mainNode));
  const sshds: NodeSshd[] = [];
  const nodeAddresses: Record<string, { host: string; port: number }> = {};
  try {
    for (const [i, n] of model.nodes.entries()) {
      const sshd = await startNodeSshd({
        node: n.name,
        host: NODE_HOST,
        port: opts.sshPortBase + i,
        stateDir: path.join(dir, 'sandbox', 'sshd', n.name),
        authorizedKeys: [opts.rootAuthorizedKey],
        env: envFor(n.name),
        sshdPath: opts.sshdPath,
      });
      sshds.push(sshd);
      nodeAddresses[n.name] = { host: sshd.host, port: sshd.port };
    }
  } catch (err) {
    await Promise.all(sshds.map((s) => s.stop()));
    await cliServer.stop();
    await archive?.stop();
    throw err;
  }
  let api: SandboxApi | undefined;
  if (opts.api) {
    try {
      api = await startApiServer(sandboxSourceDir(), dir, mainNode, opts.api === true ? {} : opts.api);
    } catch (err) {
      await Promise.all(sshds.map((s) => s.stop()));
      await cliServer.stop();
      await archive?.stop();
      throw err;
    }
    // /nodes reports each node's certificate fingerprint: the one this server presents.
    const fingerprint = api.fingerprint;
    model = { ...model, nodes: model.nodes.map((n) => ({ ...n, sslFingerprint: fingerprint })) };
    saveModel(dir, model);
  }

  return {
    dir,
    binDir,
    mainNode,
    envFor,
    nodeAddresses,
    sshdPids: Object.fromEntries(model.nodes.map((n, i) => [n.name, sshds[i].pid])),
    api,
    createApiUser: (u) => addUser(dir, u),
    createApiToken: (t) => {
      const token = addToken(dir, t);
      return { tokenid: token.tokenid, secret: token.secret, authorization: authHeader(token) };
    },
    injectFault: async (f) => addFault(dir, f),
    holdVmLock: (vmid) => holdLock(vmLockFile(paths.locksDir, vmid)),
    setGuestFault: (vmid, fault) => {
      const current = loadModel(dir);
      const faults = { ...current.guestFaults };
      if (fault) faults[String(vmid)] = fault;
      else delete faults[String(vmid)];
      saveModel(dir, { ...current, guestFaults: faults });
    },
    clearFaults: async () => clearFaults(dir),
    calls: async () => readCalls(dir).map(({ node, argv, exitCode }) => ({ node, argv, exitCode })),
    readConfig: async (vmid) => {
      const vm = listVms(dir).find((v) => v.vmid === vmid);
      return vm ? readIfExists(paths.conf(vm.node, vmid)) : undefined;
    },
    guestLog: async (vmid) => readIfExists(paths.guestLog(vmid)) ?? '',
    stop: async ({ keepVms = false } = {}) => {
      for (const vmid of keepVms ? [] : runningVmids(dir)) {
        signalVm(dir, vmid, 'SIGKILL', 5000);
        clearVmProcess(dir, vmid);
      }
      await Promise.all(sshds.map((s) => s.stop()));
      await cliServer.stop();
      await api?.stop();
      await archive?.stop();
      // Tasks outlive the API server, as PVE's workers outlive pveproxy, except when the
      // cluster goes away for good.
      if (!keepVms) killRunningTasks(dir);
    },
  };
}
