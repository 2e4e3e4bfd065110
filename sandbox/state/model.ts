import fs from 'node:fs';
import { createHash } from 'node:crypto';
import { clusterPaths } from './paths';
import { writeFileAtomic } from './files';

/**
 * The fixed facts of a sandbox cluster: its nodes (hardware as `pvesh` reports it) and its
 * storages (as `storage.cfg` defines them). Written once by startSandboxCluster to
 * `sandbox/cluster.json`; every CLI process reads it.
 */
export interface StorageDef {
  id: string;
  type: 'dir' | 'lvmthin' | 'nfs' | 'zfspool';
  content: string[];
  /** `pvesm status` says inactive (e.g. an unreachable NFS server). */
  active: boolean;
  enabled: boolean;
  /** Bytes; what VM volumes use comes on top of `baseUsedBytes`. */
  totalBytes: number;
  baseUsedBytes: number;
  /** Nodes that have this storage; undefined = every node. */
  nodes?: string[];
}

export interface NodeDef {
  name: string;
  online: boolean;
  /** The address migration logs print for the node. */
  ip: string;
  cpu: { model: string; sockets: number; cores: number; threads: number; mhz: string; flags: string };
  memoryBytes: number;
  memoryUsedBytes: number;
  rootfsBytes: number;
  rootfsUsedBytes: number;
  sslFingerprint: string;
  /**
   * pve-manager's version on this node (`7.4-3`) when it differs from the cluster's
   * `pveVersion`, as during a rolling upgrade.
   */
  pveVersion?: string;
  /**
   * The Linux bridges the node has (`/sys/class/net/<bridge>/bridge`); undefined = only
   * `vmbr0`, which the Proxmox VE installer makes.
   */
  bridges?: string[];
}

export interface ClusterModel {
  mainNode: string;
  /** The VM network's gateway: a VM's SSH listens on its first three octets + `.<vmid>`. */
  gateway: string;
  vmSshPort: number;
  /** Time between `qm start` and the guest's sshd answering. */
  bootDelayMs: number;
  /**
   * Lines a guest's package manager prints per call (a real `apt-get upgrade` prints
   * hundreds): lets tests stream a noisy init script. 0 = quiet.
   */
  packageOutputLines?: number;
  /**
   * How long a guest's first package-manager call prints nothing (a slow mirror's
   * metadata download): lets tests run an init script with a long silent phase. 0 = none.
   */
  packageSilenceMs?: number;
  /**
   * What a started VM runs: `process` (default) a light stand-in that serves SSH, `qemu`
   * a real QEMU booting the VM's disk (SANDBOX_GUESTS=qemu, sandbox/qemu/).
   */
  guests?: GuestKind;
  /**
   * How long a call waits for a VM's config lock before `got timeout` (PVE: 10 s); tests
   * make it short, so contention costs them little.
   */
  lockTimeoutMs?: number;
  /** How long a call waits for a storage lock (./storageLock.ts; PVE: 10 s). */
  storageLockTimeoutMs?: number;
  /** How long a linked clone or a create_base holds its storage lock (default 500 ms). */
  storageOpMs?: number;
  /**
   * How long a new VM is `unknown` in `/cluster/resources` (pvestatd reports a node's guests
   * every 10 s); 0 = at once.
   */
  statusLagMs?: number;
  /** Faults of single guests, by VMID. */
  guestFaults?: Record<string, GuestFault>;
  /** With real guests: the accelerator a probe found working on this machine. */
  accel?: 'kvm' | 'tcg';
  macPrefix: string;
  qemuVersion: string;
  pveVersion: string;
  kernel: string;
  /** Unix seconds; node uptimes count from here. */
  bootedAt: number;
  nodes: NodeDef[];
  storages: StorageDef[];
  /** Resource pools (user.cfg `pool:` lines), with their comments; absent: none, as on a fresh install. */
  pools?: PoolDef[];
}

export interface PoolDef {
  poolid: string;
  comment?: string;
}

export type GuestKind = 'process' | 'qemu';

/** What goes wrong inside one (process) guest, read when it boots (SandboxCluster.setGuestFault). */
export interface GuestFault {
  /** Boots but never answers SSH, as a guest whose network or sshd failed. */
  noSsh?: boolean;
  /** Its package manager fails every call with this status, as against a mirror that is down. */
  packageExitCode?: number;
  /** What `cloud-init status` reports: `error` (exit 1, as 20.4 to 22.4 do) instead of `done`. */
  cloudInitStatus?: 'error';
}

const GiB = 1024 ** 3;

/**
 * The Proxmox VE releases a sandbox cluster can play, as `pveversion` prints them
 * (`pve-manager/<version>/<repoid>`, the repoid being the commit the package was built
 * from). 9.1 is the default; 8.4, the last point release of 8, is also the oldest whose
 * download-url takes `content=import` (images fetched by the node), which API mode relies
 * on. What differs between them is keyed on the major release where it is modelled: the
 * privileges (../api/access.ts), the guest agent's permission checks
 * (../api/routes/qemu.ts) and the bridge check at start (../cli/qm/bridges.ts).
 */
export const PVE_RELEASES = {
  '9.1': 'pve-manager/9.1.1/42db4a6cf33dac83',
  '8.4': 'pve-manager/8.4.1/2a5fa54a8503f96d',
} as const;

export type PveRelease = keyof typeof PVE_RELEASES;

export const DEFAULT_PVE_RELEASE: PveRelease = '9.1';

export const DEFAULT_PVE_VERSION: string = PVE_RELEASES[DEFAULT_PVE_RELEASE];

/** The major release of a `release` as /version gives it (`9.1` → 9). */
export const majorOf = (release: string): number => Number(release.split('.')[0]);

/** A desktop Kaby Lake: x86-64-v3 with AES (no AVX-512). */
const V3_FLAGS =
  'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb invpcid_single pti ssbd ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm mpx rdseed adx smap clflushopt intel_pt xsaveopt xsavec xgetbv1 xsaves dtherm ida arat pln pts hwp hwp_notify hwp_act_window hwp_epp md_clear flush_l1d arch_capabilities';

/** A Westmere Xeon: SSE4.2, POPCNT, AES and PCLMUL but no AVX, i.e. x86-64-v2-AES. */
const V2_AES_FLAGS =
  'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 cx16 xtpr pdcm pcid dca sse4_1 sse4_2 popcnt aes lahf_lm epb pti ssbd ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid dtherm ida arat flush_l1d';

function fingerprint(seed: string): string {
  // Stable per node name, shaped like a SHA-256 certificate fingerprint.
  const hex = createHash('sha256').update(seed).digest('hex').toUpperCase();
  return hex.match(/../g)!.join(':');
}

function nodeDef(name: string, index: number, host: string): NodeDef {
  const modern = index !== 1;
  return {
    name,
    online: true,
    ip: host,
    cpu: modern
      ? { model: 'Intel(R) Core(TM) i7-7700 CPU @ 3.60GHz', sockets: 1, cores: 4, threads: 8, mhz: '3600.000', flags: V3_FLAGS }
      : { model: 'Intel(R) Xeon(R) CPU X5670 @ 2.93GHz', sockets: 2, cores: 6, threads: 24, mhz: '2933.436', flags: V2_AES_FLAGS },
    memoryBytes: (modern ? 64 : 32) * GiB,
    memoryUsedBytes: (modern ? 5.5 : 3.25) * GiB,
    rootfsBytes: 94 * GiB,
    rootfsUsedBytes: 7.5 * GiB,
    sslFingerprint: fingerprint(name),
  };
}

export function defaultModel(o: {
  nodes: string[];
  mainNode: string;
  gateway: string;
  vmSshPort: number;
  bootDelayMs: number;
  packageOutputLines?: number;
  packageSilenceMs?: number;
  nodeHost: string;
  pveVersion?: string;
}): ClusterModel {
  return {
    mainNode: o.mainNode,
    gateway: o.gateway,
    vmSshPort: o.vmSshPort,
    bootDelayMs: o.bootDelayMs,
    packageOutputLines: o.packageOutputLines,
    packageSilenceMs: o.packageSilenceMs,
    macPrefix: 'BC:24:11',
    qemuVersion: '9.2.0',
    pveVersion: o.pveVersion ?? DEFAULT_PVE_VERSION,
    kernel: '6.8.12-9-pve',
    bootedAt: Math.floor(Date.now() / 1000) - 7 * 86400,
    nodes: o.nodes.map((n, i) => nodeDef(n, i, o.nodeHost)),
    storages: stockStorages(),
  };
}

/**
 * storage.cfg as the Proxmox VE 8 installer writes it on ext4/xfs with LVM (pve-installer
 * `Proxmox/Install/StorageConfig.pm`, `get_lvm_thin_config`): `local` is a directory for
 * ISOs, templates and backups, not disks; `local-lvm` a thin pool for disks and containers.
 * The installer of 9.0 adds `import` to `local` (commit ec1d5ee); the 8.4 the sandbox plays
 * has it only where configured (`storageContent`). Plus an NFS share whose server is down.
 */
export function stockStorages(): StorageDef[] {
  return [
    { id: 'local', type: 'dir', content: ['backup', 'iso', 'vztmpl'], active: true, enabled: true, totalBytes: 94 * GiB, baseUsedBytes: 7.5 * GiB },
    { id: 'local-lvm', type: 'lvmthin', content: ['images', 'rootdir'], active: true, enabled: true, totalBytes: 1710 * GiB, baseUsedBytes: 58 * GiB },
    { id: 'nfs-backup', type: 'nfs', content: ['backup', 'iso'], active: false, enabled: true, totalBytes: 0, baseUsedBytes: 0 },
  ];
}

/**
 * The storages with `content` replaced where `configured` names one, as `pvesm set <id>
 * --content …` does (sorted, as storage.cfg prints it).
 */
export function configureStorages(storages: StorageDef[], configured: Record<string, string[]> = {}): StorageDef[] {
  for (const id of Object.keys(configured)) {
    if (!storages.some((s) => s.id === id)) throw new Error(`storageContent names '${id}', which is not one of ${storages.map((s) => s.id).join(', ')}`);
  }
  return storages.map((s) => (configured[s.id] ? { ...s, content: [...new Set(configured[s.id])].sort() } : s));
}

export function loadModel(dir: string): ClusterModel {
  return JSON.parse(fs.readFileSync(clusterPaths(dir).clusterJson, 'utf8')) as ClusterModel;
}

export function saveModel(dir: string, model: ClusterModel): void {
  writeFileAtomic(clusterPaths(dir).clusterJson, JSON.stringify(model, null, 2) + '\n');
}

/** What `pvesh get /version` answers on a node: its own pve-manager release. */
export function nodePveVersion(model: ClusterModel, node: string): { release: string; repoid: string; version: string } {
  const own = nodeOf(model, node)?.pveVersion;
  const [, clusterVersion, clusterRepo] = model.pveVersion.split('/');
  const version = own ?? clusterVersion;
  // Releases before 8 print an 8-digit repository id.
  const repoid = own ? createHash('sha256').update(own).digest('hex').slice(0, Number(own.split('.')[0]) < 8 ? 8 : 16) : clusterRepo;
  return { release: version.match(/^\d+\.\d+/)![0], repoid, version };
}

export function nodeOf(model: ClusterModel, name: string): NodeDef | undefined {
  return model.nodes.find((n) => n.name === name);
}

export function storagesOn(model: ClusterModel, node: string): StorageDef[] {
  return model.storages.filter((s) => !s.nodes || s.nodes.includes(node));
}

/** The bridges `node` has (NodeDef.bridges). */
export function nodeBridges(model: ClusterModel, node: string): string[] {
  return nodeOf(model, node)?.bridges ?? ['vmbr0'];
}
