import type { InitScriptPhase, InstallSpec, OsName } from './types';
import type { LeaseItem, ReconcileItem } from './reconcile';
import type { PoolAddress } from './addressPools';
import type { TemplateChoice, TemplateMarker } from './templates';

/**
 * Every activity of the product, as workflows call it: the name is what the Temporal UI
 * shows, the argument is one object (a retried call sends the same), the result is what
 * the workflow records in history. activities/ implements this interface; workflows proxy
 * it through workflows/activityOptions.ts.
 */

/** What a rebuild found when it looked at the VM; never holds a secret. */
export type RebuildTarget =
  | {
      exists: true;
      vmid: number;
      /** Node the VM lives on now. */
      node: string;
      /** Workflow id in the VM's sealed owner marker: what destroyOwnedVm is given. */
      owner: string;
      /** The run of `owner` the sealed markers name (absent in histories from before seals). */
      ownerRun?: string;
      /** The VM's SMBIOS uuid when inspected: its stop and destroy act on that VM only (absent in histories from before). */
      instance?: string;
      /** The spec the VM is re-created from, with `vmid` set and `node` where it lives now. */
      spec: InstallSpec;
      /** The recorded node, when the VM has been migrated away from it since. */
      movedFrom?: string;
      status: string;
      mainNode: string;
    }
  | { exists: false; vmid: number; spec: InstallSpec; mainNode: string };

/** The operation holding a VM's workflow id `vm-<vmid>`, as shown when a run has to skip. */
export interface RunningOperation {
  workflowId: string;
  runId: string;
  type: string;
  startTime: string;
}

export interface Activities {
  // Preparing an install: storage, CPU type, image, VMID, the service's SSH key.
  checkStorage: (input?: { diskGb?: number; storage?: string }) => Promise<void>;
  clusterCpuType: (input: { os: OsName; version: string; refresh?: boolean }) => Promise<string>;
  downloadImage: (input: { os: OsName; version: string }) => Promise<{ path: string; sha: string; downloaded: boolean }>;
  /** `os`/`version` let a worker that did not download the image fetch it itself. */
  stageImage: (input: { path: string; sha: string; os?: OsName; version?: string }) => Promise<string>;
  allocateVmid: (input: { exclude: number[] }) => Promise<number>;
  /** A lease from an address pool (workflows/addressPool.ts), idempotent per owner. */
  allocateAddress: (input: { pool: string; owner: string; vmid?: number; address?: string }) => Promise<PoolAddress>;
  /** Releases what an owner or a VMID holds in any pool, each lease by name; returns the addresses released. */
  releaseAddress: (input: { owner?: string; vmid?: number }) => Promise<string[]>;
  /** Releases one lease, named by pool, address and generation; none released: another lease holds the address now. */
  releaseLease: (input: { pool: string; address: string; generation: number }) => Promise<string[]>;
  /** A template build's lease from the first address pool; null without pools. */
  leaseBuildAddress: (input: { owner: string; vmid: number }) => Promise<PoolAddress | null>;
  /** The service's own public SSH key (SSH_KEY_PATH), which every VM it builds trusts. */
  servicePublicKey: () => Promise<string>;

  // Building the VM.
  /**
   * `node`: where the VM was created, the worker's MAIN_NODE (absent in results recorded by
   * earlier versions). `ip`: its address, or `dhcp` for a spec asking for DHCP. `address`:
   * the VM's lease from an address pool; absent, its address is GATEWAY's /24 plus the VMID.
   */
  createVm: (input: { vmid: number; name: string; spec: InstallSpec; cpuType: string; owner: string; address?: PoolAddress }) => Promise<{ ip: string; node?: string }>;
  importDisk: (input: { vmid: number; imagePath: string; storage?: string }) => Promise<string>;
  configureVm: (input: {
    vmid: number;
    /** The imported boot disk; absent: the VM has its boot disk already (a clone of a template). */
    volid?: string;
    spec: InstallSpec;
    ip: string;
    /** ipconfig0 of a pool address (`ip=<addr>/<prefix>,gw=<gw>`); absent: `ip=<ip>/24,gw=<GATEWAY>`. */
    ipconfig?: string;
    /**
     * The service's public key (servicePublicKey). The field keeps its name from when that
     * activity was mainNodeKey: workers of earlier versions read it under this name.
     */
    mainKey: string;
    /** Neither: the user gets no usable password (login with the injected keys only). */
    passwd?: string;
    passwdHash?: string;
    /** The request's cloud-init user-data (InstallSecrets.userData); absent: Proxmox generates the user-data. */
    userData?: string;
  }) => Promise<void>;
  /** `node`: where the workflow made the VM, asked before the cluster's resources (absent in inputs of earlier versions). */
  migrateVm: (input: { vmid: number; target: string; node?: string; instance?: string }) => Promise<void>;

  // Golden templates: built by buildTemplate, cloned by installs.
  templateRecipe: (input: { os: OsName; version: string; storage?: string }) => Promise<{ recipe: string; storage: string }>;
  findTemplate: (input: { os: OsName; version: string; storage?: string; diskGb: number }) => Promise<TemplateChoice>;
  /** `qm clone` of `template` as the install's VM (`ip` and `node` as createVm's), in one of the storage's clone slots. */
  cloneVm: (input: {
    template: { vmid: number; node: string; storage: string; linked: boolean };
    vmid: number;
    name: string;
    spec: InstallSpec;
    cpuType: string;
    owner: string;
    address?: PoolAddress;
  }) => Promise<{ ip: string; node: string }>;
  /** Seals the template marker into the built VM's description, then `qm template`. */
  convertToTemplate: (input: { vmid: number; owner: string; spec: InstallSpec; marker: TemplateMarker }) => Promise<void>;
  /** Removes this target's templates other than `keep`; those linked clones still use are kept. */
  retireTemplates: (input: { os: OsName; version: string; storage?: string; keep: number }) => Promise<{ retired: number[]; kept: number[] }>;

  // Power and lifecycle of an existing VM.
  /**
   * `node` (here and in the guest's activities below): where the workflow made the VM or
   * last moved it. The activity asks that node first and reads the cluster's resources only
   * when the VM is not there; without it (lifecycle operations, inputs of earlier versions),
   * it reads them to find the VM. `instance` (here and below): the VM's SMBIOS uuid the
   * command was issued for; the activity refuses (VmInstanceError) a VM at the VMID that is
   * another one. Absent in inputs of earlier versions, and in an install's own steps.
   */
  startVm: (input: { vmid: number; node?: string; instance?: string }) => Promise<void>;
  rebootVm: (input: { vmid: number; node?: string; instance?: string }) => Promise<void>;
  shutdownVm: (input: { vmid: number; instance?: string }) => Promise<void>;
  stopVm: (input: { vmid: number; instance?: string }) => Promise<void>;
  destroyVm: (input: { vmid: number; instance?: string }) => Promise<void>;
  setCpu: (input: { vmid: number; cores: number; instance?: string }) => Promise<void>;
  setMemory: (input: { vmid: number; memoryMb: number; instance?: string }) => Promise<void>;
  diskSize: (input: { vmid: number; disk: string; instance?: string }) => Promise<number>;
  growDisk: (input: { vmid: number; disk: string; sizeBytes: number; instance?: string }) => Promise<void>;
  adoptVm: (input: { vmid: number; owner: string; at: string; workflowId: string; runId: string; by?: string; tenant?: string; instance?: string }) => Promise<void>;

  // What only the product's own VMs go through: checked against the owner marker.
  /** `run`: only when the sealed markers name this run of `owner`. */
  stopOwnedVm: (input: { vmid: number; owner: string; run?: string; instance?: string }) => Promise<boolean>;
  destroyOwnedVm: (input: { vmid: number; owner: string; run?: string; instance?: string }) => Promise<boolean>;

  // Inside the guest.
  /**
   * With `vmid`, only the host key the guest agent reports (or `hostKey`, pinned before) is
   * accepted, and the key to pin is returned (see docs/security.md, guest SSH); with
   * `pinnedOnly` (the waits after an install), never one trusted on first use. With
   * `askAddress` (a static install), the guest agent is asked once, when SSH is up, for
   * the address it reports (`address`): an install compares it, and never fails on it.
   */
  waitForSsh: (input: {
    ip: string;
    user: string;
    vmid?: number;
    hostKey?: string;
    node?: string;
    pinnedOnly?: boolean;
    askAddress?: boolean;
  }) => Promise<PinnedHostKey | undefined>;
  /**
   * net0's IPv4 address as the guest agent reports it; with `wait`, until it does
   * (SSH_WAIT_TIMEOUT), else one question whose `reason` says why there is no address.
   */
  readGuestAddress: (input: { vmid: number; wait?: boolean; node?: string }) => Promise<{ ip?: string; reason?: string }>;
  waitForCloudInit: (input: { ip: string; user: string; hostKey?: string; vmid?: number }) => Promise<void>;
  /**
   * Without `phase`, the full run (a VM built from an image); see InitScriptPhase. A full
   * run also asks the guest whether it must reboot (`reboot`); a phase run does not.
   * With `afterCloudInit`, it first waits for cloud-init as waitForCloudInit does, on the
   * same connection: one activity for the install's `init script` step.
   */
  runInitScript: (input: {
    ip: string;
    user: string;
    os: string;
    version: string;
    rootPassword?: string;
    vmid?: number;
    /** The key waitForSsh pinned; a run from before pinning has none. */
    hostKey?: string;
    phase?: InitScriptPhase;
    afterCloudInit?: boolean;
  }) => Promise<InitScriptRun>;

  // Rebuilds.
  inspectRebuildTarget: (input: { vmid: number; spec?: InstallSpec; instance?: string }) => Promise<RebuildTarget>;
  keptCiPassword: (input: { vmid: number; node?: string }) => Promise<{ passwdHash?: string; passwd?: string }>;
  initRootPassword: () => Promise<{ rootPassword?: string }>;
  runningVmOperation: (input: { vmid: number }) => Promise<RunningOperation | undefined>;
  relayProgress: (input: { workflowId: string; runId?: string }) => Promise<number>;

  // The reconciler: every VM with its verdict (it only reads; removal is destroyOwnedVm).
  planReconcile: () => Promise<ReconcileItem[]>;
  /** Every address lease with its verdict (contract/reconcile.ts leaseVerdict); it only reads. */
  planLeaseRelease: () => Promise<LeaseItem[]>;
}

/**
 * Activity names of earlier versions, registered by the worker as aliases of the current
 * ones (activities/index.ts). Installs recorded before the rename scheduled these, so a
 * replay of one, or a run started before the upgrade, schedules them again
 * (workflows/install.ts, patch ACTIVITIES_NAMED_FOR_OPERATIONS).
 */
export interface RenamedActivities {
  /** Now createVm: API mode runs no qm. */
  qmCreate: Activities['createVm'];
  /** Now servicePublicKey: the key is the service's, not a node's. */
  mainNodeKey: Activities['servicePublicKey'];
}

/** A guest's SSH host key, as waitForSsh pinned it (a `.pub` line without comment). */
export interface PinnedHostKey {
  hostKey: string;
  /** From Proxmox (the guest agent), or trusted when the VM first answered. */
  source: 'guest agent' | 'first use';
  /** `SHA256:…`, for the operator. */
  fingerprint: string;
  /** Asked for (`askAddress`): net0's IPv4 address as the guest agent reports it, or why there is none. */
  address?: { ip?: string; reason?: string };
}

/** Whether a guest must reboot to use what its init script installed, and why (lib/rebootNeed.ts). */
export interface RebootNeed {
  required: boolean;
  why: string;
}

/** What an init script run reports. Runs recorded before it returned nothing. */
export interface InitScriptRun {
  reboot?: RebootNeed;
}
