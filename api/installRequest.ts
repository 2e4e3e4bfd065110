import { z } from 'zod';
import { describeIssues } from './issues';
import { InvalidRequestError } from './errors';
import type { Config } from '../lib/config';
import { keyBlobType } from '../lib/sshKey';
import { DEFAULT_USER, field, InstallSecrets, InstallSpec, OS_VERSIONS, OsName } from '../contract';

/**
 * `POST /api/vm/install` body rules. The seed's clamping is kept for values in a sane
 * range (cpu ≤ 0 → 1, ram < 512 → 512, disk < 16G → 16G, caps from VM_MAX_*); values no
 * client means (negative, fractional, absurdly large) are refused with a 400 instead.
 */

const OPENSSH_KEY_TYPES = [
  'ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com',
];

/** One `type base64 [comment]` line whose base64 blob names the same key type. */
function isOpenSshPublicKey(line: string): boolean {
  const m = /^(\S+) ([A-Za-z0-9+/]+={0,2})(?: ([\x20-\x7e]{0,200}))?$/.exec(line);
  if (!m || !OPENSSH_KEY_TYPES.includes(m[1])) return false;
  return keyBlobType(Buffer.from(m[2], 'base64')) === m[1];
}

const int = (field: string, min: number, max: number) =>
  z
    .number({ error: `${field} must be an integer` })
    .int(`${field} must be an integer`)
    .min(min, `${field} must be at least ${min}`)
    .max(max, `${field} must be at most ${max}`);

export const installBodySchema = z
  .object({
    os: z.enum(Object.keys(OS_VERSIONS) as [OsName, ...OsName[]], { error: 'os must be debian, ubuntu or rockylinux' }),
    version: z.string({ error: 'version must be a string' }),
    id: int('id', 100, 254).optional(),
    name: field.name.optional(),
    node: z.string({ error: 'node must be a string' }).optional(),
    cpu: int('cpu', -1024, 1024).optional(),
    ram: int('ram', -1_048_576, 1_048_576).optional(),
    disk: z
      .string({ error: 'disk must be a string like "32G"' })
      .regex(/^\d{1,5}G$/, 'disk must be a whole number of GiB followed by G, like "32G"')
      .optional(),
    user: field.user.optional(),
    passwd: field.passwd.optional(),
    pubkey: z
      .string({ error: 'pubkey must be a string' })
      .max(16_384, 'pubkey is too long')
      // An empty string is a client that meant to send a key and did not: say so.
      .refine((v) => v.trim() !== '', 'pubkey must not be empty: send an OpenSSH public key, or leave the field out')
      .refine(
        (v) => v.split('\n').map((l) => l.trim()).filter(Boolean).every(isOpenSshPublicKey),
        'pubkey must be one or more OpenSSH public keys, one per line',
      )
      .optional(),
    // The seed ignored these: the server derives them from the VMID, GATEWAY and ASSIGN_STORAGE.
    ip: z.unknown().optional(),
    gateway: z.unknown().optional(),
    storage: z.unknown().optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    const versions: readonly string[] = OS_VERSIONS[body.os] ?? [];
    if (!versions.includes(body.version)) {
      ctx.addIssue({ code: 'custom', path: ['version'], message: `version must be one of ${versions.join(', ')} for ${body.os}` });
    }
  });


export function toInstallSpec(
  raw: unknown,
  config: Config,
  knownNodes: string[],
): { spec: InstallSpec; secrets: InstallSecrets } {
  const parsed = installBodySchema.safeParse(raw);
  if (!parsed.success) throw new InvalidRequestError(describeIssues(parsed.error, raw));
  const b = parsed.data;
  if (b.node !== undefined && !knownNodes.includes(b.node)) {
    throw new InvalidRequestError(`node: must be one of the cluster's nodes (${knownNodes.join(', ')})`);
  }
  const { maxCpu, maxRamMb, maxDiskGb } = config.limits;
  let cpu = b.cpu === undefined || b.cpu <= 0 ? 1 : b.cpu;
  if (maxCpu) cpu = Math.min(cpu, maxCpu);
  let ramMb = b.ram === undefined || b.ram < 512 ? 512 : b.ram;
  if (maxRamMb) ramMb = Math.min(ramMb, maxRamMb);
  let diskGb = b.disk === undefined ? 16 : Math.max(16, Number(b.disk.slice(0, -1)));
  if (maxDiskGb && diskGb >= maxDiskGb) diskGb = maxDiskGb;
  const pubkey = b.pubkey?.split('\n').map((l) => l.trim()).filter(Boolean).join('\n');
  return {
    spec: {
      os: b.os,
      version: b.version,
      vmid: b.id,
      name: b.name,
      node: b.node,
      cpu,
      ramMb,
      diskGb,
      user: b.user ?? DEFAULT_USER[b.os],
      pubkey: pubkey || undefined,
    },
    secrets: omitUndefined({ passwd: b.passwd ?? config.defaultCiPassword, rootPassword: config.rootPassword }),
  };
}

function omitUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
