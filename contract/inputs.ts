import { z } from 'zod';
import { failure } from './failures';
import { isOpenSshPublicKey, keyLines } from './openSshKey';
import { INIT_SCRIPT_PHASES, type InstallSpec, OS_VERSIONS, type OsName } from './types';

/**
 * The rules for every value a caller controls, as zod schemas: the one set the API checks
 * request bodies with (a 400 naming the field, contract/requests.ts), the workflows and
 * activities check their own input with (checkInput), the CLI types its flags with and the
 * OpenAPI document is generated from. The codec already keeps out input the API did not
 * make; checking again where the value is used means one slip upstream still reaches no
 * Proxmox call, and since both sides use these schemas they refuse the same values.
 * Workflow code imports this module, so it stays free of Node.js imports.
 */

/** The bounds of the numbers a caller gives, each written once. */
export const LIMITS = {
  /**
   * An installed VM's VMID without address pools: it is the last octet of its address in
   * GATEWAY's /24. With pools (ADDRESS_POOLS) the address is leased, and any VMID will do.
   */
  installVmid: { min: 100, max: 254 },
  /** Any VMID Proxmox allows (an adopted VM, a rebuild schedule's target). */
  vmid: { min: 100, max: 999_999_999 },
  /** The cores of an install (VM_MAX_CPU caps them further). */
  cores: { min: 1, max: 1024 },
  /** The cores `set/cpu` sets, as in the seed. */
  setCores: { min: 1, max: 32 },
  ramMb: { min: 512, max: 1_048_576 },
  /** The memory `set/memory` sets, as in the seed. */
  setMemoryMb: { min: 512, max: 32_768 },
  diskGb: { min: 16, max: 99_999 },
  /** What `set/disk` grows a disk by at a time. */
  diskIncrementGb: { min: 1, max: 4096 },
  pubkeyChars: 16_384,
  /** Placement: Proxmox stores at most 8192 characters of description, QemuRun's markers included. */
  tags: 32,
  tagChars: 64,
  descriptionBytes: 8192,
  /** net0's `tag`, as Proxmox's net format bounds it (the 802.1Q VLAN ids). */
  vlan: { min: 1, max: 4094 },
  /**
   * net0's `mtu`. Proxmox's format allows 1..65520, but `qm start` refuses a virtio NIC's
   * MTU below 576 (the IP minimum; 1 means the bridge's, which leaving the field out does
   * already) and above its bridge's MTU, which only the node knows: what cannot start is
   * refused here, what can only be judged on the node is Proxmox's to refuse at start.
   */
  mtu: { min: 576, max: 65520 },
  /** `nameserver`: the resolv.conf limit (glibc's MAXNS) cloud-init writes into. */
  dnsServers: { min: 1, max: 3 },
  /** Extra data disks: scsi1..scsi8, each 1..99999 GiB. */
  extraDisks: 8,
  extraDiskGb: { min: 1, max: 99_999 },
  /**
   * cloud-init user-data: it travels in Temporal payloads (encrypted, but every
   * retry and history keeps a copy) and Proxmox reads a snippet up to 1 MiB; 64 KiB is
   * plenty for packages, files and commands, and keeps the payloads small.
   */
  userDataBytes: 65_536,
} as const;

interface Range {
  min: number;
  max: number;
}

/**
 * An integer field. Each message starts with the field's name, which the API's answer
 * drops after naming it (`cpu: must be at least 1`) and a worker's refusal keeps.
 */
export function int(name: string, { min, max }: Range, rule: { what?: string; unit?: string } = {}) {
  const what = rule.what ?? 'an integer';
  const unit = rule.unit ?? '';
  return z
    .number({ error: `${name} must be ${what}` })
    .int(`${name} must be ${what}`)
    .min(min, `${name} must be at least ${min}${unit}`)
    .max(max, `${name} must be at most ${max}${unit}`);
}

const OS_NAMES = Object.keys(OS_VERSIONS) as [OsName, ...OsName[]];

/** A dotted quad without leading zeros (which some parsers read as octal). */
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const ipv6 = z.ipv6();
export const isIpAddress = (v: string): boolean => IPV4.test(v) || ipv6.safeParse(v).success;

/** A DNS name: dot-separated labels of letters, digits and inner hyphens, 253 characters at most. */
const DNS_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * zod 4 runs an array's length checks on any value with a length, so a string in place of
 * a list would also be told it is too long. Its checks take `when` (zod's $ZodCheckDef),
 * which the typings of .min/.max leave out: spread in, it limits them to lists.
 */
const onlyLists: object = { when: (p: { value: unknown }) => Array.isArray(p.value) };

/** One OpenSSH public key a line; `lines` says how the text is split (a request's is trimmed first). */
const pubkeyOf = (lines: (text: string) => string[]) =>
  z
    .string({ error: 'pubkey must be a string' })
    .max(LIMITS.pubkeyChars, 'pubkey is too long')
    .refine((v) => lines(v).every(isOpenSshPublicKey), 'pubkey must be one or more OpenSSH public keys, one per line');

export const field = {
  vmid: int('vmid', LIMITS.vmid),
  /** An install's VMID, under the name the caller gives it (`id` in a request, `vmid` in a spec). */
  installVmid: (name: string) => int(name, LIMITS.installVmid),
  cores: int('cores', LIMITS.setCores),
  memoryMb: int('memoryMb', LIMITS.setMemoryMb),
  os: z.enum(OS_NAMES, { error: 'os must be debian, ubuntu or rockylinux' }),
  /** Absent is the full run; `full` itself is never sent, so a full run's input stays as it was. */
  initScriptPhase: z.enum(INIT_SCRIPT_PHASES, { error: 'phase must be template, seal or clone' }),
  version: z.string({ error: 'version must be a string' }),
  name: z
    .string({ error: 'name must be a string' })
    .regex(/^[A-Za-z0-9]([A-Za-z0-9-]{0,52}[A-Za-z0-9])?$/, 'name must be a DNS label: letters, digits and inner hyphens, at most 54 characters'),
  user: z
    .string({ error: 'user must be a string' })
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'user must be a POSIX user name: lower-case letters, digits, _ and -, at most 32 characters')
    .refine((u) => u !== 'root', 'user must not be root'),
  passwd: z
    .string({ error: 'passwd must be a string' })
    .regex(/^[\x20-\x7e]{1,128}$/, 'passwd must be 1 to 128 printable ASCII characters without newlines'),
  /** A password as Proxmox stores it (SHA-256 crypt), kept across a rebuild. */
  passwdHash: z.string().regex(/^\$5\$(rounds=\d{1,9}\$)?[^$:\s]{1,16}\$[./0-9A-Za-z]{43}$/, 'passwdHash must be a SHA-256 crypt hash'),
  /** Node names as NODE_<name> allows them. */
  node: z.string({ error: 'node must be a string' }).regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$/, 'node must be a node name'),
  /** A spec's keys, as the API stores them: one key a line, nothing else. */
  pubkey: pubkeyOf((v) => v.split('\n')),
  /**
   * A request's keys: lines are trimmed and blank ones dropped (the API stores them so); an
   * empty string is a client that meant to send a key and did not: it is told so.
   */
  requestPubkey: pubkeyOf(keyLines).refine((v) => v.trim() !== '', 'pubkey must not be empty: send an OpenSSH public key, or leave the field out'),
  disk: z.string().regex(/^(scsi|virtio|sata|ide)\d{1,2}$/, 'disk must be a disk name like scsi0'),
  ...placementFields(),
  /**
   * net0's bridge: Proxmox's `pve-bridge-id` (`^[-_.\w\d]+$`, in ASCII) within Linux's
   * 15 characters of an interface name, so no name is taken that no node can have.
   */
  bridge: z
    .string({ error: 'bridge must be a string' })
    .regex(/^[-_.A-Za-z0-9]{1,15}$/, 'bridge must be a Proxmox bridge name like vmbr0: letters, digits, -, _ and ., at most 15 characters'),
  vlan: int('vlan', LIMITS.vlan, { what: `an integer VLAN tag from ${LIMITS.vlan.min} to ${LIMITS.vlan.max}` }),
  mtu: int('mtu', LIMITS.mtu, { what: `an integer from ${LIMITS.mtu.min} to ${LIMITS.mtu.max}` }),
  /** The VM's resolver, written as Proxmox's `nameserver` and `searchdomain`. */
  dns: z
    .object(
      {
        servers: z
          .array(z.string({ error: 'must be an IPv4 or IPv6 address' }).refine(isIpAddress, 'must be an IPv4 or IPv6 address'), {
            error: 'dns.servers must be a list of IPv4 or IPv6 addresses',
          })
          .min(LIMITS.dnsServers.min, { message: `dns.servers must list at least ${LIMITS.dnsServers.min} address`, ...onlyLists })
          .max(LIMITS.dnsServers.max, { message: `dns.servers must list at most ${LIMITS.dnsServers.max} addresses`, ...onlyLists })
          .optional(),
        search: z
          .string({ error: 'dns.search must be a string' })
          .regex(DNS_NAME, 'dns.search must be one domain name, like example.com')
          .optional(),
      },
      { error: 'dns must be an object like {"servers": ["192.0.2.53"], "search": "example.com"}' },
    )
    .strict(),
  ...diskFields(),
  /**
   * cloud-init user-data: a `#cloud-config` document. Its shape here (a string, the first
   * line, the size); its YAML and the keys QemuRun owns are checked by lib/vm/userData.ts,
   * which the workflow bundle cannot load (the API and configureVm run it).
   */
  userData: z
    .string({ error: 'userData must be a string holding a #cloud-config document' })
    .refine((v) => utf8Bytes(v) <= LIMITS.userDataBytes, `userData must be at most ${LIMITS.userDataBytes} bytes`)
    .refine((v) => /^#cloud-config[ \t]*(\r?\n|$)/.test(v), 'userData must start with a "#cloud-config" line (other cloud-init formats are not taken)'),
  ...addressFields(),
};

/**
 * How the VM gets its address. `ip` is `"dhcp"` (the address is read from the
 * guest agent) or one address of an address pool (ADDRESS_POOLS); without pools a seed
 * client's address (with a prefix, or empty) is ignored, as the seed ignored it.
 */
function addressFields() {
  const ipMessage = 'ip must be "dhcp" (the address is read from the guest agent) or an IPv4 address of an address pool';
  const dhcp = z.literal('dhcp', { error: ipMessage });
  const staticIp = z
    .string({ error: ipMessage })
    .regex(IPV4, 'ip must be an IPv4 address like 192.0.2.10')
    .describe('one address of an address pool, which must be free; ignored, as in the seed, when no pools are configured');
  /** What a seed client sent and the seed ignored (an address, or nothing in it); without pools it still means the formula. */
  const seedAddress = z.string({ error: ipMessage }).regex(/^(\d{1,3}(\.\d{1,3}){3}(\/\d{1,2})?)?$/, ipMessage);
  return {
    ip: z
      .union([dhcp, seedAddress], { error: ipMessage })
      .describe('"dhcp": the VM takes its address by DHCP and QemuRun reads it from the guest agent. An address: that address of an address pool (ignored, as in the seed, without pools). Left out: the pool\'s lowest free address, or without pools <GATEWAY\'s /24>.<VMID>'),
    specIp: z.union([dhcp, staticIp], { error: ipMessage }),
    addressPool: z
      .string({ error: 'addressPool must be a string' })
      .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'addressPool must be the name of an address pool (ADDRESS_POOLS): lower-case letters, digits and -')
      .describe("the address pool (ADDRESS_POOLS) the VM's static address is leased from; default the first configured pool"),
    staticIp,
  };
}

/**
 * Where a VM goes and how Proxmox labels it ("placement"), each as Proxmox checks
 * it: `pve-tag` (pve-common JSONSchema.pm `$PVE_TAG_RE`, case-insensitive), `pve-poolid`,
 * `pve-storage-id`; the description's bound is Proxmox's `maxLength` (the markers come on
 * top: ./ownership.ts `installedDescriptionOverflow`).
 */
function placementFields() {
  const tagRule = /^[a-z0-9_][a-z0-9_\-+.]*$/i;
  return {
    // The pattern is checked per list, so the API's 400 names `tags` and which tag is wrong.
    tags: z
      .array(z.string({ error: 'must be a string' }), { error: 'tags must be an array of strings' })
      .max(LIMITS.tags, `tags must be at most ${LIMITS.tags} tags`)
      .superRefine((tags, ctx) => {
        tags.forEach((t, i) => {
          const problem =
            t.length > LIMITS.tagChars
              ? `is longer than ${LIMITS.tagChars} characters`
              : !tagRule.test(t)
                ? 'is not a Proxmox tag (a letter, digit or _ first, then letters, digits and _ - + .)'
                : undefined;
          if (problem) ctx.addIssue({ code: 'custom', message: `tags must be Proxmox tags: tag ${i + 1} ${problem}` });
        });
      })
      .describe('Proxmox tags (pve-tag: a letter, digit or _ first, then letters, digits and _ - + .), stored lower-cased, sorted and unique beside the OS tag'),
    // Proxmox keeps every other control character: the config writer escapes them
    // (pve-common ParseUtils.pm `encode_text`) and the reader restores them. A NUL never gets
    // there: `qm` takes the text as an argument, and an argument is a C string (execve; sshd
    // hands the command line to a shell the same way), so the command would fail every retry.
    description: z
      .string({ error: 'description must be a string' })
      .refine((v) => utf8Bytes(v) <= LIMITS.descriptionBytes, `description must be at most ${LIMITS.descriptionBytes} bytes`)
      .refine((v) => !v.includes('\0'), 'description must not contain a NUL character: qm takes the text as a command argument, which cannot hold one'),
    pool: z
      .string({ error: 'pool must be a string' })
      .regex(/^[A-Za-z0-9.\-_]+(?:\/[A-Za-z0-9.\-_]+){0,2}$/, 'pool must be a Proxmox pool name: letters, digits, . - and _ (nested pools: up to 3 levels with /)'),
    storage: z
      .string({ error: 'storage must be a string' })
      .regex(/^[a-z][a-z0-9\-_.]*[a-z0-9]$/i, 'storage must be a Proxmox storage id: a letter first, then letters, digits, - _ and ., not ending in - _ or .'),
  };
}

/**
 * The VM's hardware beyond the boot disk ("disks"): extra data disks (scsi1..),
 * the machine type and the firmware, each as Proxmox takes it (qemu-server Drive.pm
 * `$NEW_DISK_RE`, Machine.pm `$machine_fmt`, the `bios` enum). Only the values QemuRun
 * builds for are offered: `q35`/`pc`, `seabios`/`ovmf` (ovmf with its EFI disk).
 */
function diskFields() {
  const sizeRule = new RegExp(`^\\d{1,${String(LIMITS.extraDiskGb.max).length}}G$`);
  const extraDisk = (sizeMessage: string, storageMessage: string) =>
    z
      .object(
        {
          size: z.string({ error: sizeMessage }).regex(sizeRule, sizeMessage).refine((v) => Number(v.slice(0, -1)) >= LIMITS.extraDiskGb.min, sizeMessage),
          storage: z.string({ error: storageMessage }).regex(/^[a-z][a-z0-9\-_.]*[a-z0-9]$/i, storageMessage).optional(),
        },
        { error: 'must be an object like { "size": "32G", "storage": "local-lvm" }' },
      )
      .strict();
  const sizeMessage = `must be a whole number of GiB (${LIMITS.extraDiskGb.min} or more) followed by G, like "32G"`;
  const storageMessage = 'must be a Proxmox storage id: a letter first, then letters, digits, - _ and ., not ending in - _ or .';
  return {
    /** As a request gives them; the spec keeps `sizeGb` (./requests.ts `disksOf`). */
    disks: z
      .array(extraDisk(sizeMessage, storageMessage), { error: 'disks must be an array of { size, storage? }' })
      .max(LIMITS.extraDisks, `disks must be at most ${LIMITS.extraDisks} disks`)
      .describe('extra data disks, created empty as scsi1, scsi2, … after the boot disk; storage defaults to the install\'s storage'),
    specDisks: z
      .array(
        z.object({ sizeGb: z.number().int().min(LIMITS.extraDiskGb.min).max(LIMITS.extraDiskGb.max), storage: z.string().regex(/^[a-z][a-z0-9\-_.]*[a-z0-9]$/i).optional() }).strict(),
      )
      .max(LIMITS.extraDisks, `disks must be at most ${LIMITS.extraDisks} disks`),
    machine: z.enum(['q35', 'pc'], { error: 'machine must be "q35" or "pc"' }).describe("the VM's machine type (Proxmox's default: pc, i.e. i440fx)"),
    bios: z
      .enum(['seabios', 'ovmf'], { error: 'bios must be "seabios" or "ovmf"' })
      .describe('the firmware; ovmf (UEFI) comes with an EFI disk on the install\'s storage, without pre-enrolled Secure Boot keys'),
    source: z
      .enum(['template', 'image'], { error: 'source must be "template" or "image"' })
      .describe('what the VM is built from: a clone of its OS version\'s template, or the cloud image; left out: the template when a fresh one exists'),
    reboot: z
      .enum(['auto', 'always'], { error: 'reboot must be "auto" or "always"' })
      .describe('after the init script of an image install: "auto" reboots when the guest says it must (a new kernel, /run/reboot-required, needs-restarting -r), "always" as the seed did; left out: "auto"'),
  };
}

/** UTF-8 length without Buffer or TextEncoder: workflow code checks specs too. */
export function utf8Bytes(text: string): number {
  let n = 0;
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * The tags Proxmox writes for a VM (pve-guest-common GuestHelpers `get_unique_tags` with the
 * datacenter's default tag style): lower-cased, de-duplicated, sorted, joined with `;`.
 */
export function proxmoxTags(tags: readonly string[]): string {
  return [...new Set(tags.map((t) => t.toLowerCase()))].sort().join(';');
}

/** The version must be one of the OS's: the same words for a request and a spec. */
export function versionOfOs(v: { os: OsName; version: string }, ctx: z.RefinementCtx): void {
  const versions: readonly string[] = OS_VERSIONS[v.os] ?? [];
  if (!versions.includes(v.version)) {
    ctx.addIssue({ code: 'custom', path: ['version'], message: `version must be one of ${versions.join(', ')} for ${v.os}` });
  }
}

/**
 * A spec as earlier versions wrote it, in the names of today: they called the cores `cpu`
 * (the request's name, which in Proxmox is the CPU model). Such specs live on in workflow
 * histories, in the spec markers of VMs installed before (their seal covers the marker as
 * written, so it is read, never rewritten) and in schedules' actions.
 */
export function renameLegacySpecFields(spec: unknown): unknown {
  if (!spec || typeof spec !== 'object' || Array.isArray(spec) || !('cpu' in spec) || 'cores' in spec) return spec;
  const { cpu, ...rest } = spec as Record<string, unknown>;
  return { ...rest, cores: cpu };
}

/**
 * What an install builds, after the API's defaults and clamping (contract/requests.ts):
 * every value the request schema lets through and the clamping makes lands inside these
 * bounds, which the unit tests check field by field.
 */
const installSpecObject = z
  .object({
    os: field.os,
    version: field.version,
    // Any VMID Proxmox allows; without an address pool the /24 formula's bound (superRefine below).
    vmid: field.vmid.optional(),
    name: field.name.optional(),
    node: field.node.optional(),
    cores: int('cores', LIMITS.cores),
    ramMb: int('ramMb', LIMITS.ramMb),
    diskGb: int('diskGb', LIMITS.diskGb),
    user: field.user,
    pubkey: field.pubkey.optional(),
    // Placement: absent in specs written before, which meant none.
    tags: field.tags.optional(),
    description: field.description.optional(),
    pool: field.pool.optional(),
    storage: field.storage.optional(),
    bridge: field.bridge.optional(),
    vlan: field.vlan.optional(),
    mtu: field.mtu.optional(),
    dns: field.dns.optional(),
    // Absent in specs written before: the formula's static address. "dhcp", or an address of `addressPool`.
    ip: field.specIp.optional(),
    // Disks, machine and firmware: absent in specs written before, which meant none, Proxmox's defaults.
    disks: field.specDisks.optional(),
    machine: field.machine.optional(),
    bios: field.bios.optional(),
    // Templates: absent in specs written before, which meant the image (there were no templates).
    source: field.source.optional(),
    // Absent in specs written before: "auto" (installs recorded before it always rebooted, by their patch).
    reboot: field.reboot.optional(),
    // Address pools: absent in specs written before, which meant the /24 formula.
    addressPool: field.addressPool.optional(),
    // Tenants: absent in specs written before, or without tokens (lib/vm/tenancy.ts).
    tenant: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/, 'tenant must be the name of a tenant').optional(),
  })
  .strict()
  .superRefine(versionOfOs)
  .superRefine((v, ctx) => {
    if (v.addressPool === undefined && v.vmid !== undefined && v.vmid > LIMITS.installVmid.max) {
      ctx.addIssue({ code: 'custom', path: ['vmid'], message: `vmid must be at most ${LIMITS.installVmid.max} without an address pool (its address is GATEWAY's /24 plus the VMID)` });
    }
    if (v.ip !== undefined && v.ip !== 'dhcp' && v.addressPool === undefined) ctx.addIssue({ code: 'custom', path: ['ip'], message: 'ip needs an addressPool' });
    if (v.ip === 'dhcp' && v.addressPool !== undefined) ctx.addIssue({ code: 'custom', path: ['addressPool'], message: 'addressPool goes with a static address, not with ip "dhcp"' });
  });

export const installSpecSchema: z.ZodType<InstallSpec> = z.preprocess(renameLegacySpecFields, installSpecObject);

export const installSecretsSchema = z
  .object({
    passwd: field.passwd.optional(),
    passwdHash: field.passwdHash.optional(),
    rootPassword: z.string().regex(/^[^\r\n]*$/).optional(),
    // User-data may hold secrets: it travels with them, never in the spec (markers, memo, search attributes).
    userData: field.userData.optional(),
  })
  .strict();

const installInputSchema = z
  .object({ spec: installSpecSchema, secrets: installSecretsSchema, mainNode: field.node.optional() })
  .strict();

/** contract/workflows.ts IssuedCommand: optional here, so inputs of earlier versions replay; the workflow requires them on a new start. */
const vmRef = z.object({
  vmid: field.vmid,
  instance: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "instance must be the VM's SMBIOS uuid").optional(),
  issuedAt: z.number().int().positive().optional(),
  issuedFor: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,254}$/, 'issuedFor must be a workflow id').optional(),
});

/** A tenant's name, as the tokens file writes it (`tenant=<name>`). */
export const tenantName = z.string().regex(/^[A-Za-z0-9._@-]{1,64}$/, 'tenant must be 1 to 64 letters, digits, ".", "_", "@" or "-"');

export const workflowInputs = {
  vmRef: vmRef.strict(),
  guestRef: vmRef.extend({ ip: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}$/, 'ip must be an IPv4 address').optional(), user: field.user }).strict(),
  setCpu: vmRef.extend({ cores: field.cores }).strict(),
  setMemory: vmRef.extend({ memoryMb: field.memoryMb }).strict(),
  setDisk: vmRef.extend({ disk: field.disk, incrementGb: int('incrementGb', LIMITS.diskIncrementGb), maxDiskGb: z.number().int().positive().optional() }).strict(),
  migrate: vmRef.extend({ from: field.node, target: field.node }).strict(),
  // `by` is the adopting client's address, recorded in the VM's description.
  adopt: vmRef.extend({ by: z.string().regex(/^[0-9A-Fa-f.:]{1,45}$/, 'by must be an IP address').optional(), tenant: tenantName.optional() }).strict(),
  rebuild: vmRef.extend({ spec: installSpecSchema.optional(), passwd: field.passwd.optional() }).strict(),
  install: installInputSchema,
  buildTemplate: z
    .object({ os: field.os, version: field.version, storage: field.storage.optional() })
    .strict()
    .superRefine(versionOfOs),
};

/** A schema of the contract: what workflow code names without importing zod itself. */
export type InputSchema<T> = z.ZodType<T>;

/** `input` if it follows `schema`; otherwise an error naming every bad field (never its value). */
export function checkInput<T>(schema: InputSchema<T>, input: unknown, what: string): T {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ');
  throw new InvalidInputError(`invalid input for ${what}: ${problems}`);
}

export class InvalidInputError extends Error {
  override readonly name = 'InvalidInputError';
}

/**
 * A workflow's or an activity's own input, checked with the API's rules before it reaches
 * a command (`what`: the workflow or activity type). Input that breaks them did not come
 * through the API, so it fails for good as InvalidRequestError: a retry would not fix it.
 */
export function checkedInput<T>(schema: InputSchema<T>, input: unknown, what: string): T {
  try {
    return checkInput(schema, input, what);
  } catch (err) {
    if (err instanceof InvalidInputError) throw failure('InvalidRequestError', err.message);
    throw err;
  }
}
