import crypto from 'node:crypto';
import fs from 'node:fs';
import { assertPrivateFile } from './privateFile';

/**
 * API tokens with roles, from API_TOKENS_FILE: one `<role> <token or sha256:hex> <name>
 * [tenant=<name>]` a line, `#` starts a comment. Each role can do what the ones before it can:
 *   read     list, status, workflows and their events, schedules, the reconcile preview
 *   operate  install, the lifecycle operations and rebuild of managed VMs, cancel its own work
 *   admin    adopt, reconcile, schedules, the CPU baseline, cancel anyone's work
 * Only SHA-256 digests are kept in memory, so a token given as a digest never exists here.
 *
 * A token belongs to a tenant: `read` and `operate` see and act on that tenant's VMs only,
 * `admin` on every VM. A line without `tenant=` is a tenant of its own, named after the
 * token: no token shares VMs with another unless the file says so (docs/security.md).
 */

export const ROLES = ['read', 'operate', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export interface ApiToken {
  role: Role;
  /** Who holds it: in 403 answers, logs and workflow memos, never the token itself. */
  name: string;
  /** The tenant whose VMs the token sees and acts on (its own name when the line names none). */
  tenant: string;
  sha256: Buffer;
}

const MIN_TOKEN_LENGTH = 16;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const TENANT = 'tenant=';
const DIGEST = /^sha256:([0-9a-fA-F]{64})$/;

export function roleAtLeast(have: Role, need: Role): boolean {
  return ROLES.indexOf(have) >= ROLES.indexOf(need);
}

export function sha256(text: string): Buffer {
  return crypto.createHash('sha256').update(text).digest();
}

/** The tokens a file's text lists; every bad line is a problem naming its line, never its token. */
export function parseApiTokens(text: string, where: string): { tokens: ApiToken[]; problems: string[] } {
  const tokens: ApiToken[] = [];
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    const at = `${where} line ${i + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 3 && fields.length !== 4) {
      problems.push(`${at}: must be "<role> <token or sha256:hex> <name> [tenant=<name>]" (3 or 4 fields, got ${fields.length})`);
      return;
    }
    const [role, secret, name, tenantField] = fields;
    if (!(ROLES as readonly string[]).includes(role)) {
      problems.push(`${at}: role must be one of ${ROLES.join(', ')}`);
      return;
    }
    if (!NAME.test(name)) {
      problems.push(`${at}: name must be 1 to 64 letters, digits, ".", "_", "@" or "-"`);
      return;
    }
    if (tenantField !== undefined && !tenantField.startsWith(TENANT)) {
      problems.push(`${at}: the 4th field must be tenant=<name>`);
      return;
    }
    const tenant = tenantField === undefined ? name : tenantField.slice(TENANT.length);
    if (!NAME.test(tenant)) {
      problems.push(`${at}: tenant must be 1 to 64 letters, digits, ".", "_", "@" or "-"`);
      return;
    }
    const digest = DIGEST.exec(secret);
    if (!digest && secret.length < MIN_TOKEN_LENGTH) {
      problems.push(`${at}: the token must be at least ${MIN_TOKEN_LENGTH} characters (or sha256:<64 hex digits>)`);
      return;
    }
    const hash = digest ? Buffer.from(digest[1], 'hex') : sha256(secret);
    if (tokens.some((t) => t.name === name)) problems.push(`${at}: name ${name} is used twice`);
    else if (tokens.some((t) => t.sha256.equals(hash))) problems.push(`${at}: the same token is listed twice`);
    else tokens.push({ role: role as Role, name, tenant, sha256: hash });
  });
  return { tokens, problems };
}

/** Reads API_TOKENS_FILE: private to the service's user, as the encryption key file must be. */
export function readApiTokensFile(file: string, setting = 'API_TOKENS_FILE'): { tokens: ApiToken[]; problems: string[] } {
  try {
    assertPrivateFile(file, setting, 'can act as every token it lists');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { tokens: [], problems: [code ? `${setting}: cannot read ${file} (${code})` : (err as Error).message] };
  }
  return parseApiTokens(fs.readFileSync(file, 'utf8'), `${setting} ${file}`);
}

/**
 * The token `given` is, compared in constant time against every entry (no early exit), so
 * the answer's timing tells neither how much of a guess was right nor which entry matched.
 */
export function findToken(tokens: readonly ApiToken[], given: string | undefined): ApiToken | undefined {
  if (given === undefined) return undefined;
  const hash = sha256(given);
  let found: ApiToken | undefined;
  for (const t of tokens) {
    if (crypto.timingSafeEqual(t.sha256, hash) && found === undefined) found = t;
  }
  return found;
}
