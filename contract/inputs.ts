import { z } from 'zod';
import { OS_VERSIONS, type OsName } from './types';

/**
 * The rules for every value a caller controls, as zod schemas, shared by the API (which
 * answers 400 naming the field) and by the workflows and activities (which refuse their
 * own input with them again). The codec already keeps out input the API did not make;
 * checking again where the value is used means one slip upstream still reaches no `qm`.
 * Workflow code imports this module, so it stays free of Node.js imports.
 */

const int = (field: string, min: number, max: number) =>
  z
    .number({ error: `${field} must be an integer` })
    .int(`${field} must be an integer`)
    .min(min, `${field} must be at least ${min}`)
    .max(max, `${field} must be at most ${max}`);

export const field = {
  vmid: int('vmid', 100, 999_999_999),
  cores: int('cores', 1, 32),
  memoryMb: int('memoryMb', 512, 32768),
  os: z.enum(Object.keys(OS_VERSIONS) as [OsName, ...OsName[]], { error: 'os must be debian, ubuntu or rockylinux' }),
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
  /** `type base64 [comment]` lines, no options (`command=`…) before the type. */
  pubkey: z
    .string({ error: 'pubkey must be a string' })
    .max(16_384, 'pubkey is too long')
    .refine(
      (v) => v.split('\n').every((l) => /^(ssh|ecdsa|sk)-[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,2}( [\x20-\x7e]{0,200})?$/.test(l)),
      'pubkey must be one or more OpenSSH public keys, one per line',
    ),
  disk: z.string().regex(/^(scsi|virtio|sata|ide)\d{1,2}$/, 'disk must be a disk name like scsi0'),
};

export const installSpecSchema = z
  .object({
    os: field.os,
    version: z.string(),
    vmid: field.vmid.max(254).optional(),
    name: field.name.optional(),
    node: field.node.optional(),
    cpu: int('cpu', 1, 1024),
    ramMb: int('ramMb', 512, 1_048_576),
    diskGb: int('diskGb', 16, 99_999),
    user: field.user,
    pubkey: field.pubkey.optional(),
  })
  .strict()
  .refine((s) => (OS_VERSIONS[s.os] as readonly string[]).includes(s.version), { message: 'version is not one of the OS versions', path: ['version'] });

export const installSecretsSchema = z
  .object({ passwd: field.passwd.optional(), passwdHash: field.passwdHash.optional(), rootPassword: z.string().regex(/^[^\r\n]*$/).optional() })
  .strict();

const installInputSchema = z
  .object({ spec: installSpecSchema, secrets: installSecretsSchema, mainNode: field.node.optional() })
  .strict();

const vmRef = z.object({ vmid: field.vmid });
export const workflowInputs = {
  vmRef: vmRef.strict(),
  guestRef: vmRef.extend({ ip: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}$/, 'ip must be an IPv4 address'), user: field.user }).strict(),
  setCpu: vmRef.extend({ cores: field.cores }).strict(),
  setMemory: vmRef.extend({ memoryMb: field.memoryMb }).strict(),
  setDisk: vmRef.extend({ disk: field.disk, incrementGb: int('incrementGb', 1, 4096), maxDiskGb: z.number().int().positive().optional() }).strict(),
  migrate: vmRef.extend({ from: field.node, target: field.node }).strict(),
  // `by` is the adopting client's address, recorded in the VM's description.
  adopt: vmRef.extend({ by: z.string().regex(/^[0-9A-Fa-f.:]{1,45}$/, 'by must be an IP address').optional() }).strict(),
  rebuild: vmRef.extend({ spec: installSpecSchema.optional(), passwd: field.passwd.optional() }).strict(),
  install: installInputSchema,
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
