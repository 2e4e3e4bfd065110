import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import os from 'node:os';
import { z } from 'zod';
import { StartupError } from './startupError';
import { LOG_LEVELS } from './observability/log';
import { type ApiToken, readApiTokensFile, sha256 } from './apiTokens';
import { OS_VERSIONS, type AddressPool, type OsName, type TemplateTarget } from '../contract';
import { readAddressPools } from './addressPools/setting';

/**
 * Settings, read once from the environment (and `.env`, loaded by the entry point).
 * The seed's names are kept so an operator can move over unchanged; new settings have
 * defaults that work on a fresh machine.
 */

const intFrom = (def: number) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be an integer')
    .transform(Number)
    .optional()
    .transform((v) => v ?? def);

/** A true/false setting: 1/true/yes or 0/false/no (any case); unset or empty is false. */
const flag = z
  .string()
  .trim()
  .regex(/^(0|1|true|false|yes|no)?$/i, 'must be true or false')
  .optional()
  .transform((v) => /^(1|true|yes)$/i.test(v ?? ''));

const optionalInt = z
  .string()
  .trim()
  .regex(/^\d+$/, 'must be a non-negative integer')
  .transform(Number)
  .optional();

const ipv4 = z
  .string()
  .trim()
  .regex(/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/, 'must be an IPv4 address');

/** `<ip>` or `<ip>:<port>` (port defaults to 22). */
const nodeAddress = z
  .string()
  .trim()
  .regex(/^[^:\s]+(:\d{1,5})?$/, 'must be <ip> or <ip>:<port>')
  .transform((v) => {
    const [host, port] = v.split(':');
    return { host, port: port ? Number(port) : 22 };
  });

const csv = z
  .string()
  .optional()
  .transform((v) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

/** Comma-separated IP addresses: an entry that is not one (a typo, a host name) would match no caller. */
const ipCsv = csv.refine((list) => list.every((ip) => net.isIP(ip) !== 0), {
  error: (iss) => `must list IP addresses, comma-separated; not one: ${(iss.input as string[]).filter((ip) => net.isIP(ip) === 0).join(', ')}`,
});

/** `15m` → 900000; `off` or `0` → undefined. */
function durationMs(v: string): number | undefined {
  const m = /^(\d+)([smhd])$/i.exec(v);
  if (!m) return undefined;
  return Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2].toLowerCase() as 's' | 'm' | 'h' | 'd'];
}
/** `debian-12` or `debian-12@local-zfs` (TEMPLATES): a target, or why it is none. */
function parseTemplateTarget(item: string): TemplateTarget | string {
  const m = /^([a-z]+)-([0-9.]+)(?:@([A-Za-z][A-Za-z0-9_.-]*))?$/.exec(item);
  const os = m?.[1] as OsName | undefined;
  if (!m || !os || !Object.hasOwn(OS_VERSIONS, os)) return `"${item}" is not <os>-<version>[@storage], e.g. debian-12 or ubuntu-24.04@local-zfs (os: ${Object.keys(OS_VERSIONS).join(', ')})`;
  const versions: readonly string[] = OS_VERSIONS[os];
  if (!versions.includes(m[2])) return `"${item}": ${os} has versions ${versions.join(', ')}`;
  return { os, version: m[2], ...(m[3] !== undefined ? { storage: m[3] } : {}) };
}

/** `user@realm!tokenid=secret`, as `pveum user token add` prints its parts. */
const API_TOKEN_FORMAT = /^[^\s@!=]+@[^\s@!=]+![A-Za-z][A-Za-z0-9._-]*=\S+$/;

export const envSchema = z.object({
  QEMURUN_ROLE: z.enum(['all', 'api', 'worker'], { error: 'must be all, api or worker' }).default('all'),
  PORT: intFrom(8080),
  API_HOST: z.string().trim().min(1).default('127.0.0.1'),
  WORKER_HEALTH_PORT: intFrom(8081),
  WORKER_HEALTH_HOST: z.string().trim().min(1).default('127.0.0.1'),
  WORKER_SHUTDOWN_GRACE: intFrom(20),
  WORKER_MAX_CACHED_WORKFLOWS: intFrom(50),
  GATEWAY: ipv4.optional(),
  MAIN_NODE: z.string().trim().min(1).optional(),
  ALLOW_IPS: ipCsv,
  TRUSTED_PROXIES: ipCsv,
  API_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  API_TOKENS_FILE: z.string().trim().min(1).optional(),
  ANONYMOUS_ACCESS: z.enum(['read', 'none'], { error: 'must be read or none' }).optional(),
  ALLOW_ORIGINS: csv.refine(
    (list) => list.every((o) => /^https?:\/\/[^/\s?#]+$/i.test(o)),
    'must list origins like https://ui.example:8443 (scheme, host, port; no path), comma-separated',
  ),
  PUBLIC_DIAGNOSTICS: flag,
  DIAGNOSTICS_IPS: ipCsv.default(['127.0.0.1', '::1']),
  ADOPT_VMID_RANGE: z
    .string()
    .trim()
    .regex(/^\d{3,9}-\d{3,9}$/, 'must be <first>-<last>, e.g. 100-254')
    .optional()
    .transform((v) => (v === undefined ? undefined : (v.split('-').map(Number) as [number, number])))
    .refine((r) => r === undefined || (r[0] >= 100 && r[0] <= r[1]), 'must be <first>-<last> with 100 <= first <= last'),
  ASSIGN_STORAGE: z.string().trim().min(1).optional(),
  SNIPPETS_STORAGE: z
    .string()
    .trim()
    .regex(/^[a-z][a-z0-9\-_.]*[a-z0-9]$/i, 'must be a Proxmox storage id, like local')
    .default('local'),
  ASSIGN_IP_START: intFrom(100),
  ASSIGN_IP_END: intFrom(254),
  VM_MAX_CPU: optionalInt,
  VM_MAX_RAM: optionalInt,
  VM_MAX_DISK: optionalInt,
  VM_BALLOON_MIN: optionalInt,
  VM_ROOT_PASSWORD: z.string().optional(),
  UNSAFE_DEFAULT_PASSWORDS: z
    .enum(['0', '1', 'true', 'false', ''], { error: 'must be 1 or 0' })
    .optional()
    .transform((v) => v === '1' || v === 'true'),
  VM_SSH_PORT: intFrom(22),
  VM_BRIDGE: z.string().trim().default('vmbr0'),
  ADDRESS_POOLS: z.string().optional(),
  CLONE_CONCURRENCY: intFrom(2).refine((n) => n >= 1 && n <= 64, 'must be an integer from 1 to 64'),
  SSH_WAIT_TIMEOUT: intFrom(600),
  GUEST_AGENT_WAIT: intFrom(120),

  DATA_DIR: z.string().optional(),
  SSH_KEY_PATH: z.string().optional(),
  NODE_SSH_USER: z.string().default('root'),
  MAIN_NODE_IMAGE_DIR: z
    .string()
    .trim()
    .default('/var/tmp/qemurun-images')
    .refine((v) => path.posix.isAbsolute(v), 'must be an absolute path on the main node'),

  // API mode (lib/proxmox/api): a token instead of root SSH to the nodes.
  PROXMOX_API_URL: z
    .string()
    .optional()
    .transform((v) => (v ?? '').split(',').map((s) => s.trim().replace(/\/+$/, '')).filter(Boolean))
    .refine((urls) => urls.every((u) => /^https:\/\/[^/\s]+$/.test(u)), 'must be https://<host>[:port], comma-separated'),
  PROXMOX_API_TOKEN: z.string().trim().regex(API_TOKEN_FORMAT, 'must be user@realm!tokenid=secret').optional(),
  PROXMOX_API_TOKEN_FILE: z.string().trim().min(1).optional(),
  PROXMOX_API_CA_FILE: z.string().trim().min(1).optional(),
  // One SHA-256 pin for every URL, or one per URL in PROXMOX_API_URL's order (each node
  // has a certificate of its own), comma-separated.
  PROXMOX_API_FINGERPRINT: z
    .string()
    .trim()
    .regex(
      /^(?:(?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}|[0-9A-Fa-f]{64})(?:\s*,\s*(?:(?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}|[0-9A-Fa-f]{64}))*$/,
      'must be a SHA-256 fingerprint (AA:BB:... as pvenode cert info prints it), or one per URL, comma-separated',
    )
    .optional(),
  PROXMOX_API_INSECURE: flag,
  PROXMOX_IMAGE_STORAGE: z.string().trim().min(1).default('local'),

  TEMPORAL_ADDRESS: z.string().trim().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().trim().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().trim().default('qemurun'),
  TEMPORAL_UI_PORT: intFrom(8233),
  TEMPORAL_DEV_PORT: intFrom(7233),
  TEMPORAL_CLI_PATH: z.string().optional(),
  TEMPORAL_TLS_CERT: z.string().trim().optional(),
  TEMPORAL_TLS_KEY: z.string().trim().optional(),
  TEMPORAL_TLS_CA: z.string().trim().optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().trim().optional(),

  // No default here: whether any is set decides if sandbox mode serves its own images.
  IMAGE_BASE_DEBIAN: z.string().url().optional(),
  IMAGE_BASE_UBUNTU: z.string().url().optional(),
  IMAGE_BASE_ROCKYLINUX: z.string().url().optional(),

  INIT_MIRROR: z.string().trim().optional(),
  INIT_TIMEZONE: z.string().trim().default('UTC'),
  INIT_LOCALE: z.string().trim().default('en_US.UTF-8'),
  INIT_PACKAGES: z.string().default(''),
  INIT_SWAP_SIZE: z.string().trim().regex(/^(0|[1-9]\d*[MG])$/, 'must be a size like 2G, 512M, or 0').default('2G'),
  ENCRYPTION_KEYS: z.string().optional(),
  ENCRYPTION_KEY_FILE: z.string().optional(),
  CODEC_UI_ORIGINS: csv,
  REQUEST_TIMEOUT_MS: intFrom(30_000),
  SSE_MAX_PER_CLIENT: intFrom(20),
  SSE_MAX_TOTAL: intFrom(100),
  SSE_MAX_ANONYMOUS: optionalInt,
  RECONCILE_PREVIEW_MAX_AGE: intFrom(30),
  SCHEDULE_MIN_INTERVAL: z
    .string()
    .trim()
    .regex(/^[1-9]\d*(s|m|h|d)$/i, 'must be a duration like 15m, 1h or 1d')
    .default('1h')
    .transform((v) => durationMs(v) as number),
  SCHEDULE_MAX_COUNT: intFrom(100),
  MANAGE_ALL_VMS: flag,
  // Golden templates.
  TEMPLATES: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const targets: TemplateTarget[] = [];
      for (const item of v.split(',').map((s) => s.trim()).filter(Boolean)) {
        const target = parseTemplateTarget(item);
        if (typeof target === 'string') ctx.addIssue({ code: 'custom', message: target });
        else targets.push(target);
      }
      return targets;
    }),
  TEMPLATE_SCHEDULE: z
    .string()
    .trim()
    .regex(/^(@(daily|weekly|hourly|midnight)|[0-9*,/-]+( [0-9A-Za-z*,/-]+){4})$/, 'must be a cron expression like "30 2 * * *" (every night at 02:30), or @daily or @weekly')
    .default('30 2 * * *'),
  TEMPLATE_MAX_AGE: z
    .string()
    .trim()
    .regex(/^[1-9]\d*(s|m|h|d)$/i, 'must be a duration like 7d or 36h')
    .default('7d')
    .transform((v) => durationMs(v) as number),

  RECONCILE_INTERVAL: z
    .string()
    .trim()
    .regex(/^(off|0|[1-9]\d*(s|m|h|d))$/i, 'must be a duration like 15m, 1h, 1d, or off')
    .default('15m')
    .transform(durationMs),
  LOG_LEVEL: z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }))
    .default('info'),
  TEMPORAL_METRICS_ADDRESS: z
    .string()
    .trim()
    .regex(/^[^:\s]+:\d{1,5}$/, 'must be <host>:<port>, e.g. 127.0.0.1:9464')
    .optional(),

  SANDBOX_BOOT_DELAY_MS: intFrom(1500),
  SANDBOX_PACKAGE_SILENCE_MS: intFrom(0),
  SANDBOX_LOCK_TIMEOUT_MS: intFrom(10_000),
  SANDBOX_STATUS_LAG_MS: intFrom(10_000),
  SANDBOX_NODES: z.string().default('pve1,pve2'),
  SANDBOX_POOLS: z
    .string()
    .trim()
    .regex(/^([A-Za-z0-9.\-_]+(\/[A-Za-z0-9.\-_]+){0,2}(\s*,\s*|$))*$/, 'must list Proxmox pool names, comma-separated (lab,prod)')
    .default('')
    .transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean)),
  SANDBOX_SSH_PORT_BASE: intFrom(2200),
  SANDBOX_TOOLS_PATH: z.string().optional(),
  SANDBOX_API_PORT: intFrom(0).refine((p) => p >= 0 && p <= 65535, 'must be a port number (0 = any free port)'),
  SANDBOX_GUESTS: z
    .string()
    .trim()
    .pipe(z.enum(['process', 'qemu'], { error: 'must be process (light stand-ins, the default) or qemu (real Debian guests in QEMU)' }))
    .default('process'),
  SANDBOX_QEMU_IMAGES: z
    .string()
    .trim()
    .regex(/^((11|12|13)(\s*,\s*|$))*$/, 'must list Debian versions among 11, 12, 13, comma-separated')
    .default('11,12,13')
    .transform((v) => [...new Set(v.split(',').map((x) => x.trim()).filter(Boolean))]),
  SANDBOX_GUEST_ARCHIVE: z
    .string()
    .trim()
    .regex(/^http:\/\/[A-Za-z0-9.-]+(:\d{1,5})?\/?$/, 'must be an http:// URL of a host that serves /debian and /debian-security, e.g. http://deb.debian.org')
    .default('http://deb.debian.org'),
  SANDBOX_PVE_VERSION: z
    .string()
    .trim()
    .pipe(z.enum(['9.1', '8.4'], { error: 'must be 9.1 (Proxmox VE 9.1, the default) or 8.4 (the last release of 8)' }))
    .default('9.1'),
  SANDBOX_PVE_VERSIONS: z
    .string()
    .trim()
    .regex(/^([A-Za-z0-9-]+=\d+\.\d+[.-]\d+(\s*,\s*|$))*$/, 'must be <node>=<pve-manager version>, comma-separated (pve2=7.4-3)')
    .optional()
    .transform((v) => Object.fromEntries((v ?? '').split(',').filter((p) => p.trim()).map((p) => p.split('=').map((x) => x.trim())))),
});

/** The package mirror real sandbox guests see: the sandbox's archive proxy (sandbox/qemu/network.ts). */
export const SANDBOX_GUEST_ARCHIVE_URL = 'http://10.0.2.100';

/** Where the cloud images come from unless IMAGE_BASE_* say otherwise. */
const UPSTREAM_IMAGE_BASES = {
  debian: 'https://cloud.debian.org/images/cloud',
  ubuntu: 'https://cloud-images.ubuntu.com/releases',
  rockylinux: 'https://dl.rockylinux.org/pub/rocky',
} as const;

/** NODE_<name> shares its prefix with Node.js's own variables; those are not cluster nodes. */
const NODE_JS_VARIABLES: ReadonlySet<string> = new Set([
  'ENV', 'OPTIONS', 'PATH', 'DEBUG', 'DEBUG_NATIVE', 'DISABLE_COLORS', 'ICU_DATA', 'PENDING_DEPRECATION',
  'REPL_HISTORY', 'REPL_EXTERNAL_MODULE', 'NO_WARNINGS', 'COMPILE_CACHE', 'CHANNEL_FD', 'UNIQUE_ID',
  'VERSION', 'MODULE_VERSION',
]);

/** The seed's defaults, printed in its README: known to everyone, so used only on request. */
const SEED_ROOT_PASSWORD = '0123456789';
const SEED_CI_PASSWORD = 'passwd';

export interface NodeAddress {
  host: string;
  port: number;
}

/** Every level read-only: what a Config holds is what the settings said. */
export type DeepReadonly<T> = T extends Uint8Array
  ? T
  : T extends (infer U)[]
  ? ReadonlyArray<DeepReadonly<U>>
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/**
 * The settings, read once and shared by every part of the service: none may change them.
 * A part that runs with other values (sandbox mode's nodes and images) is given a new
 * config built from this one (app/sandbox.ts).
 */
export type Config = DeepReadonly<ReturnType<typeof buildConfig>>;

export class ConfigError extends StartupError {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** `HTTPS://UI.example:443` → `https://ui.example`: the form a browser's Origin header takes. */
function originOf(text: string): string {
  try {
    return new URL(text).origin;
  } catch {
    return text.toLowerCase();
  }
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}

/** API mode's settings, files read; undefined in CLI mode. The token is a secret: never log this. */
export interface ProxmoxApiConfig {
  urls: string[];
  token: string;
  ca?: string;
  /** One pin for every URL, or one per URL (same order as `urls`). */
  fingerprint?: string | string[];
  insecure: boolean;
  /** Storage the nodes download cloud images to (content `import`). */
  imageStorage: string;
}

function buildConfig(
  env: z.infer<typeof envSchema>,
  nodes: Record<string, NodeAddress>,
  proxmoxApi: ProxmoxApiConfig | undefined,
  apiTokens: ApiToken[],
  addressPools: AddressPool[] = [],
) {
  const dataDir = path.resolve(env.DATA_DIR ?? 'data');
  // The /24 formula caps VMIDs at 254; with pools a VM's address no longer follows its VMID.
  const vmidMax = addressPools.length > 0 ? 999_999_999 : 254;
  const ipStart = clamp(env.ASSIGN_IP_START, 100, vmidMax);
  const ipEnd = clamp(env.ASSIGN_IP_END, 100, vmidMax);
  return {
    /**
     * What this process runs: `all` the API and a worker (and, when nothing is configured,
     * the sandbox and a dev server); `api` the HTTP API only; `worker` a worker only.
     */
    role: env.QEMURUN_ROLE,
    port: env.PORT,
    /** Where the API listens: loopback unless the operator opens it (every route answers there, admin ones included). */
    apiHost: env.API_HOST,
    worker: {
      /** The worker role's liveness/readiness port (the API's port serves them otherwise). */
      healthPort: env.WORKER_HEALTH_PORT,
      /** Where the health port listens: loopback unless opened (it serves readiness details and metrics). */
      healthHost: env.WORKER_HEALTH_HOST,
      /** Seconds a stopping worker gives running activities before they are cancelled. */
      shutdownGraceSec: Math.max(0, env.WORKER_SHUTDOWN_GRACE),
      /**
       * Workflow runs kept in the worker's memory between their tasks (Temporal's sticky
       * cache). The SDK's default grows with the heap limit, thousands on a large machine,
       * each run holding its own copy of the workflow modules: memory the process never
       * gives back. A run not in the cache is replayed from its history on its next task.
       */
      maxCachedWorkflows: Math.max(0, env.WORKER_MAX_CACHED_WORKFLOWS),
    },
    /** True when no Proxmox is configured: the service runs against the sandbox cluster. */
    sandbox: env.MAIN_NODE === undefined,
    /** Set: Proxmox is reached through its REST API with a token, and no node over SSH. */
    proxmoxApi,
    gateway: env.GATEWAY ?? '127.0.0.1',
    mainNode: env.MAIN_NODE ?? 'pve1',
    nodes,
    // Sandbox mode is for trying the product on one machine: local callers may mutate.
    allowIps: env.ALLOW_IPS.length > 0 || env.MAIN_NODE !== undefined ? env.ALLOW_IPS : ['127.0.0.1', '::1'],
    trustedProxies: env.TRUSTED_PROXIES,
    /** API_TOKEN (role admin) and API_TOKENS_FILE's tokens; empty: the guard decides by address alone. */
    apiTokens: [...(env.API_TOKEN ? [{ role: 'admin' as const, name: 'API_TOKEN', tenant: 'API_TOKEN', sha256: sha256(env.API_TOKEN) }] : []), ...apiTokens],
    /**
     * What a caller without a token may do once tokens exist: `read` (the GET endpoints) or
     * `none` (health, the OpenAPI document and the init scripts only). Default: `none` with
     * API_TOKENS_FILE (an operator who hands out read tokens wants them needed), `read`
     * otherwise (API_TOKEN alone has always left reads open).
     */
    anonymousAccess: env.ANONYMOUS_ACCESS ?? (env.API_TOKENS_FILE ? 'none' : 'read'),
    /** Browser origins, besides the API's own, that may call it (CORS) and change things. */
    allowOrigins: env.ALLOW_ORIGINS.map(originOf),
    /** /metrics and readiness details for every caller, not only DIAGNOSTICS_IPS, ALLOW_IPS and token holders. */
    publicDiagnostics: env.PUBLIC_DIAGNOSTICS,
    /** Callers served /metrics and readiness details without a token, besides ALLOW_IPS: the machine's own tools by default. */
    diagnosticsIps: env.DIAGNOSTICS_IPS,
    /**
     * The managed set: false (default) lets mutating operations act only on VMs carrying the
     * owner marker (installed or adopted); true acts on every VM, as the seed did.
     */
    manageAllVms: env.MANAGE_ALL_VMS,
    // Where a stock Proxmox VE install keeps disks: the installer's `local` takes no `images`.
    storage: env.ASSIGN_STORAGE ?? 'local-lvm',
    /** Where an install's cloud-init user snippet goes (content `snippets`, which Proxmox's stock `local` lacks). */
    snippetsStorage: env.SNIPPETS_STORAGE,
    vmidRange: { start: Math.min(ipStart, ipEnd), end: Math.max(ipStart, ipEnd) },
    /** VMIDs an adoption may take in; default the install range (a VM's address follows its VMID). */
    adoptVmidRange: env.ADOPT_VMID_RANGE
      ? { start: env.ADOPT_VMID_RANGE[0], end: env.ADOPT_VMID_RANGE[1] }
      : { start: Math.min(ipStart, ipEnd), end: Math.max(ipStart, ipEnd) },
    limits: { maxCpu: env.VM_MAX_CPU, maxRamMb: env.VM_MAX_RAM, maxDiskGb: env.VM_MAX_DISK },
    balloonMinMb: env.VM_BALLOON_MIN,
    /**
     * Without VM_ROOT_PASSWORD root's password is locked, and without a request `passwd`
     * the cloud-init user has none: keys only. UNSAFE_DEFAULT_PASSWORDS brings back the
     * seed's well-known defaults for operators who depend on them.
     */
    rootPassword: env.VM_ROOT_PASSWORD || (env.UNSAFE_DEFAULT_PASSWORDS ? SEED_ROOT_PASSWORD : undefined),
    defaultCiPassword: env.UNSAFE_DEFAULT_PASSWORDS ? SEED_CI_PASSWORD : undefined,
    vmSshPort: env.VM_SSH_PORT,
    bridge: env.VM_BRIDGE,
    /**
     * Named address pools (ADDRESS_POOLS, lib/addressPools): set, every install takes a
     * static address from one (the first by default); empty, the VM's address is GATEWAY's
     * /24 plus its VMID, as in the seed.
     */
    addressPools,
    /**
     * Clones running at once on one storage of one node (workflows/storageSlots.ts): more
     * only queue on pve-storage's storage lock, whose 10 s wait fails the ones behind.
     */
    cloneConcurrency: env.CLONE_CONCURRENCY,
    sshWaitTimeoutSec: env.SSH_WAIT_TIMEOUT,
    /**
     * How long a new guest's SSH may answer before its agent does: past it, an image
     * without qemu-guest-agent is trusted on first use (docs/security.md).
     */
    guestAgentWaitSec: env.GUEST_AGENT_WAIT,
    dataDir,
    sshKeyPath: env.SSH_KEY_PATH ?? path.join(os.homedir(), '.ssh', 'id_ed25519'),
    nodeSshUser: env.NODE_SSH_USER,
    /** Where images are copied on a main node reached over SSH (qm importdisk reads them there). */
    nodeImageDir: env.MAIN_NODE_IMAGE_DIR.replace(/\/+$/, '') || '/',
    temporal: {
      address: env.TEMPORAL_ADDRESS,
      namespace: env.TEMPORAL_NAMESPACE,
      taskQueue: env.TEMPORAL_TASK_QUEUE,
      uiPort: env.TEMPORAL_UI_PORT,
      devPort: env.TEMPORAL_DEV_PORT,
      cliPath: env.TEMPORAL_CLI_PATH,
      /** mTLS to an external server (lib/temporal/tls.ts): PEM file paths. */
      tls: {
        cert: env.TEMPORAL_TLS_CERT || undefined,
        key: env.TEMPORAL_TLS_KEY || undefined,
        ca: env.TEMPORAL_TLS_CA || undefined,
        serverName: env.TEMPORAL_TLS_SERVER_NAME || undefined,
      },
    },
    imageBase: {
      debian: (env.IMAGE_BASE_DEBIAN ?? UPSTREAM_IMAGE_BASES.debian).replace(/\/+$/, ''),
      ubuntu: (env.IMAGE_BASE_UBUNTU ?? UPSTREAM_IMAGE_BASES.ubuntu).replace(/\/+$/, ''),
      rockylinux: (env.IMAGE_BASE_ROCKYLINUX ?? UPSTREAM_IMAGE_BASES.rockylinux).replace(/\/+$/, ''),
    },
    /**
     * Sandbox mode with no IMAGE_BASE_* set serves its own small images (sandbox/mirror),
     * so a first run needs no network; any IMAGE_BASE_* means the operator chose a source.
     */
    imageMirror:
      env.MAIN_NODE === undefined &&
      env.IMAGE_BASE_DEBIAN === undefined &&
      env.IMAGE_BASE_UBUNTU === undefined &&
      env.IMAGE_BASE_ROCKYLINUX === undefined,
    encryption: { keys: env.ENCRYPTION_KEYS, keyFile: env.ENCRYPTION_KEY_FILE },
    /** Browser origins of the Temporal UI allowed to call the codec endpoint. */
    codecUiOrigins:
      env.CODEC_UI_ORIGINS.length > 0
        ? env.CODEC_UI_ORIGINS
        : [`http://127.0.0.1:${env.TEMPORAL_UI_PORT}`, `http://localhost:${env.TEMPORAL_UI_PORT}`],
    initScript: {
      // Real sandbox guests reach Debian's archive only through the sandbox's proxy.
      mirror: env.INIT_MIRROR || (env.MAIN_NODE === undefined && env.SANDBOX_GUESTS === 'qemu' ? SANDBOX_GUEST_ARCHIVE_URL : undefined),
      timezone: env.INIT_TIMEZONE,
      locale: env.INIT_LOCALE,
      packages: env.INIT_PACKAGES.split(/[\s,]+/).filter(Boolean),
      swapSize: env.INIT_SWAP_SIZE,
    },
    /** How often the reconcile schedule runs (workflows/reconcile.ts); undefined: no schedule. */
    reconcileIntervalMs: env.RECONCILE_INTERVAL,
    logLevel: env.LOG_LEVEL,
    /** Where the Temporal SDK's own Prometheus exporter (worker and client metrics) listens; unset: off. */
    temporalMetricsAddress: env.TEMPORAL_METRICS_ADDRESS,
    /** HTTP limits (api/limits.ts): 0 turns either off. */
    http: {
      requestTimeoutMs: Math.max(0, env.REQUEST_TIMEOUT_MS),
      sseMaxPerClient: Math.max(0, env.SSE_MAX_PER_CLIENT),
      sseMaxTotal: Math.max(0, env.SSE_MAX_TOTAL),
      /** Streams of callers without a token and not changing anything: the rest is kept for installs and token holders. */
      sseMaxAnonymous: env.SSE_MAX_ANONYMOUS ?? Math.floor(Math.max(0, env.SSE_MAX_TOTAL) / 2),
    },
    /** GET /api/reconcile answers a preview at most this old (seconds) instead of starting another run. */
    reconcilePreviewMaxAgeSec: Math.max(0, env.RECONCILE_PREVIEW_MAX_AGE),
    schedules: { minIntervalMs: env.SCHEDULE_MIN_INTERVAL, maxCount: Math.max(0, env.SCHEDULE_MAX_COUNT) },
    /**
     * Golden templates: the targets refreshed on TEMPLATE_SCHEDULE (Temporal
     * Schedules made at start, app/templateSchedules.ts), and how old a template may be for
     * an install to clone it when it did not ask for a source.
     */
    templates: { targets: env.TEMPLATES, schedule: env.TEMPLATE_SCHEDULE, maxAgeMs: env.TEMPLATE_MAX_AGE },
    sandboxOptions: {
      bootDelayMs: env.SANDBOX_BOOT_DELAY_MS,
      /** A slow package mirror: the guests' first apt-get/dnf says nothing for this long. */
      packageSilenceMs: env.SANDBOX_PACKAGE_SILENCE_MS,
      /** How long a qm call waits for a VM's config lock (Proxmox: 10 s). */
      lockTimeoutMs: env.SANDBOX_LOCK_TIMEOUT_MS,
      /** How long a new VM is `unknown` in /cluster/resources (pvestatd's 10 s cycle). */
      statusLagMs: env.SANDBOX_STATUS_LAG_MS,
      nodes: env.SANDBOX_NODES.split(',').map((s) => s.trim()).filter(Boolean),
      /** Resource pools the simulated cluster has (none on a fresh Proxmox VE install). */
      pools: env.SANDBOX_POOLS,
      sshPortBase: env.SANDBOX_SSH_PORT_BASE,
      /** Where sandbox mode looks for sshd, bwrap...; unset: PATH and the system dirs. */
      toolsPath: env.SANDBOX_TOOLS_PATH,
      /** The sandbox's REST API (HTTPS, 127.0.0.1); 0 = a free port, shown in the banner. */
      apiPort: env.SANDBOX_API_PORT,
      /** The Proxmox VE release the simulated cluster plays: 9.1, or 8.4 with 8's privileges. */
      pveRelease: env.SANDBOX_PVE_VERSION,
      /** Nodes reporting another Proxmox VE version than the cluster's (an upgrade in progress). */
      pveVersions: env.SANDBOX_PVE_VERSIONS as Record<string, string>,
      /** What a started VM runs: a light process (default) or a real QEMU guest. */
      guests: env.SANDBOX_GUESTS,
      /** Debian versions the sandbox builds real cloud images of (with real guests). */
      qemuImages: env.SANDBOX_QEMU_IMAGES,
      /** Where real guests' apt-get is proxied to. */
      guestArchive: env.SANDBOX_GUEST_ARCHIVE,
    },
  };
}

/** Reads and validates settings; throws ConfigError naming every bad setting. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(`${issue.path.join('.')}: ${issue.message}`);
    }
  }
  const nodes: Record<string, NodeAddress> = {};
  for (const [key, value] of Object.entries(source)) {
    const m = /^NODE_([A-Za-z0-9][A-Za-z0-9.-]*)$/.exec(key);
    if (!m || NODE_JS_VARIABLES.has(m[1]) || value === undefined) continue;
    const addr = nodeAddress.safeParse(value);
    if (addr.success) nodes[m[1]] = addr.data;
    else problems.push(`${key}: ${addr.error.issues[0].message}`);
  }
  // Checked on the raw values too, so one start-up names every problem at once.
  const main = source.MAIN_NODE?.trim();
  const apiMode = Boolean(source.PROXMOX_API_URL?.trim());
  if (main) {
    if (!source.GATEWAY) problems.push('GATEWAY: required when MAIN_NODE is set');
    if (!source.ASSIGN_STORAGE) problems.push('ASSIGN_STORAGE: required when MAIN_NODE is set');
    // In API mode no node is reached over SSH, so no address is needed.
    if (!apiMode && !source[`NODE_${main}`]) problems.push(`NODE_${main}: required, the address of MAIN_NODE`);
  }
  if (parsed.success) {
    const sandboxNodes = parsed.data.SANDBOX_NODES.split(',').map((n) => n.trim());
    for (const node of Object.keys(parsed.data.SANDBOX_PVE_VERSIONS)) {
      if (!sandboxNodes.includes(node)) problems.push(`SANDBOX_PVE_VERSIONS: '${node}' is not one of SANDBOX_NODES (${sandboxNodes.join(', ')})`);
    }
  }
  const proxmoxApi = parsed.success ? readApiSettings(parsed.data, problems) : undefined;
  const tokens = parsed.success && parsed.data.API_TOKENS_FILE ? readApiTokensFile(parsed.data.API_TOKENS_FILE) : { tokens: [], problems: [] };
  problems.push(...tokens.problems);
  const addressPools = readAddressPools(source.ADDRESS_POOLS, problems);
  // A process of one role shares its Temporal server and cluster with the others: neither
  // can be one it would start for itself.
  const role = source.QEMURUN_ROLE?.trim();
  if (role === 'api' || role === 'worker') {
    if (!source.TEMPORAL_ADDRESS?.trim()) {
      problems.push(`TEMPORAL_ADDRESS: required with QEMURUN_ROLE=${role}, the Temporal server the API and the workers share`);
    }
    if (!main) {
      problems.push(`MAIN_NODE: required with QEMURUN_ROLE=${role} (npm run sandbox prints the settings of a simulated cluster)`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  return Object.freeze(buildConfig(parsed.data, nodes, proxmoxApi, tokens.tokens, addressPools));
}

/** API mode's settings with the token and CA read from their files; problems are collected. */
function readApiSettings(env: z.infer<typeof envSchema>, problems: string[]): ProxmoxApiConfig | undefined {
  const others = (['PROXMOX_API_TOKEN', 'PROXMOX_API_TOKEN_FILE', 'PROXMOX_API_CA_FILE', 'PROXMOX_API_FINGERPRINT'] as const).filter((k) => env[k] !== undefined);
  if (env.PROXMOX_API_URL.length === 0) {
    if (others.length > 0 || env.PROXMOX_API_INSECURE) problems.push(`PROXMOX_API_URL: required with ${others[0] ?? 'PROXMOX_API_INSECURE'}`);
    return undefined;
  }
  let token = env.PROXMOX_API_TOKEN;
  if (token !== undefined && env.PROXMOX_API_TOKEN_FILE !== undefined) {
    problems.push('PROXMOX_API_TOKEN_FILE: set it or PROXMOX_API_TOKEN, not both');
  } else if (env.PROXMOX_API_TOKEN_FILE !== undefined) {
    try {
      token = fs.readFileSync(env.PROXMOX_API_TOKEN_FILE, 'utf8').trim();
    } catch (err) {
      problems.push(`PROXMOX_API_TOKEN_FILE: cannot read ${env.PROXMOX_API_TOKEN_FILE} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      token = undefined;
    }
    // The message names the format only: the file's content is the secret.
    if (token !== undefined && !API_TOKEN_FORMAT.test(token)) problems.push('PROXMOX_API_TOKEN_FILE: must hold user@realm!tokenid=secret');
  } else if (token === undefined) {
    problems.push('PROXMOX_API_TOKEN: required with PROXMOX_API_URL (or PROXMOX_API_TOKEN_FILE)');
  }
  const trust = [env.PROXMOX_API_CA_FILE && 'PROXMOX_API_CA_FILE', env.PROXMOX_API_FINGERPRINT && 'PROXMOX_API_FINGERPRINT', env.PROXMOX_API_INSECURE && 'PROXMOX_API_INSECURE'].filter(Boolean);
  if (trust.length > 1) problems.push(`${trust[1]}: set one of PROXMOX_API_CA_FILE, PROXMOX_API_FINGERPRINT, PROXMOX_API_INSECURE (also set: ${trust[0]})`);
  let ca: string | undefined;
  if (env.PROXMOX_API_CA_FILE !== undefined) {
    try {
      ca = fs.readFileSync(env.PROXMOX_API_CA_FILE, 'utf8');
      if (!ca.includes('-----BEGIN CERTIFICATE-----')) problems.push(`PROXMOX_API_CA_FILE: ${env.PROXMOX_API_CA_FILE} holds no PEM certificate`);
    } catch (err) {
      problems.push(`PROXMOX_API_CA_FILE: cannot read ${env.PROXMOX_API_CA_FILE} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  const pins = env.PROXMOX_API_FINGERPRINT?.split(',').map((f) => f.trim());
  if (pins && pins.length > 1 && pins.length !== env.PROXMOX_API_URL.length) {
    problems.push(`PROXMOX_API_FINGERPRINT: ${pins.length} fingerprints for ${env.PROXMOX_API_URL.length} URLs in PROXMOX_API_URL; give one for all, or one per URL in the same order`);
  }
  if (token === undefined) return undefined;
  return {
    urls: env.PROXMOX_API_URL,
    token,
    ca,
    fingerprint: pins && pins.length > 1 ? pins : pins?.[0],
    insecure: env.PROXMOX_API_INSECURE,
    imageStorage: env.PROXMOX_IMAGE_STORAGE,
  };
}
