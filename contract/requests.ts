import { z } from 'zod';
import { field, int, LIMITS, proxmoxTags, tenantName, versionOfOs } from './inputs';
import { keyLines } from './openSshKey';
import { DEFAULT_USER, type InstallSpec } from './types';

/**
 * The bodies of the API's requests, in the seed's shape, built from the fields and bounds
 * of ./inputs: the routes check with them (a 400 naming the field), the OpenAPI document
 * is generated from them and the CLI types its flags with them. Each message starts with
 * the field's name, which the API's answer puts in front (`cpu: must be at most 32`).
 */

/** A size a request may give: the seed clamps small and non-positive values up, so their negatives are accepted too. */
const clamped = (name: string, max: number) => int(name, { min: -max, max });

/**
 * `POST /api/vm/install`. The seed's clamping is kept for values in a sane range (cpu ≤ 0
 * → 1, ram < 512 → 512, disk < 16G → 16G, caps from VM_MAX_*: installSpecFromBody); values
 * no client means (fractional, absurdly large) are refused with a 400 instead.
 */
export const installBodySchema = z
  .object({
    os: field.os,
    version: field.version,
    // Up to 254 without address pools: the API checks, as it knows ADDRESS_POOLS (api/installRequest.ts).
    id: int('id', LIMITS.vmid).describe('the VMID: 100..254 without address pools (the last octet of its address), any VMID Proxmox allows with them').optional(),
    name: field.name.optional(),
    // Any string: the API looks it up among the cluster's nodes, and its refusal names them.
    node: z.string({ error: 'node must be a string' }).optional(),
    /** The cores (the seed's name; in Proxmox `cpu` is the CPU model). */
    cpu: clamped('cpu', LIMITS.cores.max).optional(),
    ram: clamped('ram', LIMITS.ramMb.max).optional(),
    disk: z
      .string({ error: 'disk must be a string like "32G"' })
      .regex(new RegExp(`^\\d{1,${String(LIMITS.diskGb.max).length}}G$`), 'disk must be a whole number of GiB followed by G, like "32G"')
      .optional(),
    user: field.user.optional(),
    passwd: field.passwd.optional(),
    pubkey: field.requestPubkey.optional(),
    /** net0's bridge; without it the VM_BRIDGE setting. */
    bridge: field.bridge.optional(),
    /** net0's VLAN tag; without it untagged. */
    vlan: field.vlan.optional(),
    /** net0's MTU; without it the bridge's. */
    mtu: field.mtu.optional(),
    /** The VM's DNS servers and search domain; without them the node's (Proxmox's default). */
    dns: field.dns.optional(),
    /**
     * "dhcp"; or an address of an address pool (with ADDRESS_POOLS; a seed client's address is
     * ignored without them, as the seed did); left out: the pool's next free address, or the
     * VMID's in GATEWAY's /24.
     */
    ip: field.ip.optional(),
    addressPool: field.addressPool.optional(),
    // The seed ignored it: the gateway is GATEWAY's, or the address pool's.
    gateway: z.unknown().optional(),
    // Placement. The seed ignored `storage` too; now it is the boot disk's (the API checks it).
    tags: field.tags.optional(),
    description: field.description.optional(),
    pool: field.pool.optional(),
    storage: field.storage.optional(),
    // Disks, machine, firmware.
    disks: field.disks.optional(),
    machine: field.machine.optional(),
    bios: field.bios.optional(),
    // Templates: "template" or "image"; left out, the template when a fresh one exists.
    source: field.source.optional(),
    // "auto" (left out) or "always": whether the image path reboots after its init script.
    reboot: field.reboot.optional(),
    // cloud-init user-data: travels as a secret, never in the spec.
    userData: field.userData.optional(),
  })
  .strict()
  .superRefine(versionOfOs);

export type InstallBody = z.infer<typeof installBodySchema>;

/** VM_MAX_CPU, VM_MAX_RAM and VM_MAX_DISK; undefined (or 0) for no cap. */
export interface SizeCaps {
  maxCpu?: number;
  maxRamMb?: number;
  maxDiskGb?: number;
}

/**
 * The spec an install body asks for, with the seed's defaults and clamping. What a body
 * the schema accepted gives here is within installSpecSchema's bounds (the caps only
 * lower a value, never under the floors unless a cap is itself below them).
 */
export function installSpecFromBody(b: InstallBody, caps: SizeCaps): InstallSpec {
  let cores = b.cpu === undefined || b.cpu <= 0 ? LIMITS.cores.min : b.cpu;
  if (caps.maxCpu) cores = Math.min(cores, caps.maxCpu);
  let ramMb = b.ram === undefined || b.ram < LIMITS.ramMb.min ? LIMITS.ramMb.min : b.ram;
  if (caps.maxRamMb) ramMb = Math.min(ramMb, caps.maxRamMb);
  let diskGb = b.disk === undefined ? LIMITS.diskGb.min : Math.max(LIMITS.diskGb.min, Number(b.disk.slice(0, -1)));
  if (caps.maxDiskGb && diskGb >= caps.maxDiskGb) diskGb = caps.maxDiskGb;
  const pubkey = b.pubkey === undefined ? undefined : keyLines(b.pubkey).join('\n');
  return {
    os: b.os,
    version: b.version,
    vmid: b.id,
    name: b.name,
    node: b.node,
    cores,
    ramMb,
    diskGb,
    user: b.user ?? DEFAULT_USER[b.os],
    pubkey: pubkey || undefined,
    bridge: b.bridge,
    vlan: b.vlan,
    mtu: b.mtu,
    // `{}` asks for nothing: the spec says so by leaving dns out.
    dns: b.dns && (b.dns.servers !== undefined || b.dns.search !== undefined) ? { servers: b.dns.servers, search: b.dns.search } : undefined,
    ...placementOf(b),
    ...disksOf(b),
    ...(b.ip === 'dhcp' ? { ip: 'dhcp' as const } : {}),
    ...(b.source !== undefined ? { source: b.source } : {}),
    ...(b.reboot !== undefined ? { reboot: b.reboot } : {}),
  };
}

/** The disks, machine and firmware a body gave (none: the spec has none, as before). */
function disksOf(b: InstallBody): Pick<InstallSpec, 'disks' | 'machine' | 'bios'> {
  return {
    ...(b.disks !== undefined && b.disks.length > 0
      ? { disks: b.disks.map((d) => ({ sizeGb: Number(d.size.slice(0, -1)), ...(d.storage !== undefined ? { storage: d.storage } : {}) })) }
      : {}),
    ...(b.machine !== undefined ? { machine: b.machine } : {}),
    ...(b.bios !== undefined ? { bios: b.bios } : {}),
  };
}

/** The placement fields a body gave (none: the spec has none, as before); tags as Proxmox keeps them. */
function placementOf(b: InstallBody): Pick<InstallSpec, 'tags' | 'description' | 'pool' | 'storage'> {
  return {
    ...(b.tags !== undefined && b.tags.length > 0 ? { tags: proxmoxTags(b.tags).split(';') } : {}),
    ...(b.description !== undefined && b.description !== '' ? { description: b.description } : {}),
    ...(b.pool !== undefined ? { pool: b.pool } : {}),
    ...(b.storage !== undefined ? { storage: b.storage } : {}),
  };
}

/** `POST /api/vm/:id/rebuild`: the spec marker holds no secrets, so a new cloud-init password comes with the request; without one the VM keeps its own. */
export const rebuildBodySchema = z.object({ passwd: field.passwd.optional() }).strict();

/** `set/cpu`: the cores (the seed's name), what the vmSetCpu workflow takes as `cores`. */
export const cpuBody = z.object({ cpu: int('cpu', LIMITS.setCores, { what: `an integer from ${LIMITS.setCores.min} to ${LIMITS.setCores.max}` }) }).strict();

/** `set/memory`, what the vmSetMemory workflow takes as `memoryMb`. */
export const memoryBody = z
  .object({
    memory: int('memory', LIMITS.setMemoryMb, { what: `an integer number of MB from ${LIMITS.setMemoryMb.min} to ${LIMITS.setMemoryMb.max}`, unit: ' (MB)' }),
  })
  .strict();

/** `set/disk`: the increment a disk grows by, as the seed took it (`<n>G`); the vmSetDisk workflow takes it as `incrementGb`. */
export const diskBody = z
  .object({
    disk: z.string({ error: 'disk must be a string like "16G"' }).superRefine((v, ctx) => {
      const gb = Number(v.slice(0, -1));
      const { min, max } = LIMITS.diskIncrementGb;
      const problem = !/^\d{1,9}G$/.test(v)
        ? 'must be a whole number of GiB followed by G, like "16G"'
        : gb < min
          ? `must grow the disk by at least ${min}G`
          : gb > max
            ? `must be at most ${max}G at a time`
            : undefined;
      if (problem) ctx.addIssue({ code: 'custom', message: `disk ${problem}` });
    }),
  })
  .strict();

/** `adopt`: the tenant the VM is adopted for; none: the adopting admin token's. */
export const adoptBody = z.object({ tenant: tenantName.optional() }).strict();

/** `set/node`: the node to migrate to; the API looks it up among the cluster's nodes. */
export const nodeBody = z.object({ node: z.string({ error: 'node must be the name of a cluster node' }).min(1, 'node must be the name of a cluster node') }).strict();
