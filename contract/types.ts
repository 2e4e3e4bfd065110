/**
 * The request and result types every layer speaks: what an install is asked for and what
 * it returns, and the progress events a run keeps.
 */
import type { ProgressSink } from './progress';

export const OS_VERSIONS = {
  debian: ['11', '12', '13'],
  ubuntu: ['20.04', '22.04', '24.04'],
  rockylinux: ['8', '9', '10'],
} as const;

export type OsName = keyof typeof OS_VERSIONS;

/**
 * The init script's phases besides `full` (a VM built from an image, the default and the
 * only one a run without a phase means): `template` and `seal` build a golden template,
 * `clone` finishes a clone of one (init-scripts/lib/common.sh, docs/init-scripts.md).
 */
export const INIT_SCRIPT_PHASES = ['template', 'seal', 'clone'] as const;
export type InitScriptPhase = (typeof INIT_SCRIPT_PHASES)[number];

export const DEFAULT_USER: Record<OsName, string> = {
  debian: 'debian',
  ubuntu: 'ubuntu',
  rockylinux: 'rocky',
};

/**
 * A validated install request, after defaults and clamping (installSpecSchema in ./inputs
 * is its rule). Secrets are separate. Specs written before `cores` had its name call it
 * `cpu`: renameLegacySpecFields reads them.
 */
export interface InstallSpec {
  os: OsName;
  version: string;
  /** Explicit VMID, or undefined to auto-assign from the configured range. */
  vmid?: number;
  /** Name prefix; the final name is `<name>-<vmid>`. Undefined means the VMID. */
  name?: string;
  /** Node to migrate to before the first boot; undefined means the main node. */
  node?: string;
  /** Cores: the request's `cpu` (in Proxmox `cpu` is the CPU model, the cluster baseline). */
  cores: number;
  ramMb: number;
  diskGb: number;
  user: string;
  /** Extra SSH public keys from the request, one per line. */
  pubkey?: string;
  // Placement. Absent: none, as in every spec written before them.
  /** Proxmox tags besides the OS's, as Proxmox keeps them (lower case, sorted, unique). */
  tags?: string[];
  /** The operator's text, kept in the VM's description after QemuRun's markers. */
  description?: string;
  /** The Proxmox resource pool the VM is created in. */
  pool?: string;
  /** The storage of the boot disk and the cloud-init drive; absent: ASSIGN_STORAGE. */
  storage?: string;
  /** The Proxmox bridge of net0; undefined means the VM_BRIDGE setting. */
  bridge?: string;
  /** net0's VLAN `tag`; undefined means untagged. */
  vlan?: number;
  /** net0's `mtu`; undefined means the bridge's MTU (Proxmox's default). */
  mtu?: number;
  /**
   * How the VM gets its IPv4 address: `dhcp` (ipconfig0 `ip=dhcp`, the address read from the
   * guest agent), or one address of `addressPool`. Undefined: the pool's lowest free address
   * with `addressPool`, else `<GATEWAY's /24>.<vmid>`, as in every spec written before.
   */
  ip?: 'dhcp' | (string & {});
  /** The VM's own `nameserver` / `searchdomain` (cloud-init); undefined means the node's. */
  dns?: InstallDns;
  // Disks, machine, firmware. Absent: none, Proxmox's defaults, as before them.
  /** Extra empty data disks, scsi1.. in order; storage absent: the install's storage. */
  disks?: ExtraDisk[];
  machine?: 'q35' | 'pc';
  /** `ovmf` comes with an EFI disk (efidisk0) on the install's storage. */
  bios?: 'seabios' | 'ovmf';
  // Address pools. Absent: the address is GATEWAY's /24 plus the VMID, as before.
  /** The pool the VM's static address is leased from (the API fills in the default pool). */
  addressPool?: string;
  /**
   * The tenant of the token that installed the VM (lib/apiTokens.ts), set by the API, never
   * by a request body. The spec marker is sealed, so Notes edits cannot move a VM to another
   * tenant, and a rebuild keeps it. Absent: installed without tokens or before tenants.
   */
  tenant?: string;
  /**
   * What the VM is built from: a clone of its OS version's template, or the cloud
   * image. Undefined: the template when a fresh one exists, else the image.
   */
  source?: 'template' | 'image';
  /**
   * After an image install's init script: `auto` reboots when the guest says it must (a new
   * kernel, /run/reboot-required, `needs-restarting -r`), `always` as the seed did.
   * Undefined: `auto`.
   */
  reboot?: 'auto' | 'always';
}

/** The DNS an install writes as Proxmox's `nameserver` and `searchdomain` options. */
export interface InstallDns {
  /** One to three IPv4 or IPv6 addresses. */
  servers?: string[];
  /** One search domain. */
  search?: string;
}

export interface ExtraDisk {
  sizeGb: number;
  storage?: string;
}

/** Secrets that travel with an install; the payload codec keeps them out of history. */
export interface InstallSecrets {
  /** Cloud-init user password. Undefined (with no hash): no usable password, keys only. */
  passwd?: string;
  /** A crypt hash kept from the VM a rebuild replaces, used when no passwd is given. */
  passwdHash?: string;
  /** Root password for the OS init script; undefined locks root's password. */
  rootPassword?: string;
  /** The request's cloud-init user-data (`#cloud-config`), merged into the VM's user snippet; undefined: none, Proxmox generates it. */
  userData?: string;
}

export type EventStatus = 'processing' | 'success' | 'info' | 'error';

/** One SSE event as the seed sent it, plus a sequence number for re-attaching. */
export interface ProgressEvent {
  seq: number;
  step: string;
  status: EventStatus;
  message: string;
  /**
   * When the workflow recorded it (workflow time, ms since the epoch). Not sent over SSE;
   * it lets the benchmark measure how long an event takes to reach a client.
   */
  at?: number;
}

export interface InstallResult {
  vmid: number;
  ip: string;
  user: string;
  node: string;
  name: string;
  elapsedSec: number;
}

/**
 * What workflows report for the service's metrics, through a Temporal sink: the worker
 * calls these only when a workflow task runs for the first time, never on replay, so a
 * worker restart or a cache eviction does not count an install twice. (Type aliases, not
 * interfaces: a sink must be assignable to the SDK's Record of functions.)
 */
export type InstallMetricsSink = {
  installStarted: (os: string) => void;
  installFinished: (os: string, outcome: 'completed' | 'failed' | 'cancelled', seconds: number, failedStep?: string) => void;
  /** A VMID another install (or a VM made by hand) took between its allocation and `qm create`. */
  vmidTaken: () => void;
};

export type QemuRunSinks = { metrics: InstallMetricsSink; progress: ProgressSink };
