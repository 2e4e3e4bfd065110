import fs from 'node:fs';
import path from 'node:path';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { clusterPaths } from '../state/paths';
import { readIfExists, withLock, writeFileAtomic } from '../state/files';

/**
 * API tokens and their privileges (user.cfg's tokens and acl entries, as far as the
 * sandbox needs them). A token is `user@realm!tokenid` with a UUID secret. Without
 * privilege separation a token of root@pam has every privilege, as root@pam has; any
 * other token has what its ACL entries grant: privileges on a path, inherited by the
 * paths below it (`/` covers everything, `/vms/100` only that VM).
 */
export interface AclEntry {
  path: string;
  /** Privilege names (`VM.Allocate`) or role names (`Administrator`, `PVEAuditor`, ...). */
  privs: string[];
}

export interface ApiToken {
  /** `user@realm!tokenid` */
  tokenid: string;
  secret: string;
  /** Privilege separation: true = the ACL below alone, false = the user's privileges. */
  privsep: boolean;
  acl: AclEntry[];
  /** Unix seconds; 0 or absent = never. */
  expire?: number;
}

/** Every privilege of PVE 8 (PVE::AccessControl's role definitions). */
export const PRIVILEGES = [
  'Datastore.Allocate', 'Datastore.AllocateSpace', 'Datastore.AllocateTemplate', 'Datastore.Audit',
  'Group.Allocate', 'Mapping.Audit', 'Mapping.Modify', 'Mapping.Use', 'Permissions.Modify',
  'Pool.Allocate', 'Pool.Audit', 'Realm.Allocate', 'Realm.AllocateUser', 'SDN.Allocate', 'SDN.Audit',
  'SDN.Use', 'Sys.AccessNetwork', 'Sys.Audit', 'Sys.Console', 'Sys.Incoming', 'Sys.Modify',
  'Sys.PowerMgmt', 'Sys.Syslog', 'User.Modify', 'VM.Allocate', 'VM.Audit', 'VM.Backup', 'VM.Clone',
  'VM.Config.CDROM', 'VM.Config.CPU', 'VM.Config.Cloudinit', 'VM.Config.Disk', 'VM.Config.HWType',
  'VM.Config.Memory', 'VM.Config.Network', 'VM.Config.Options', 'VM.Console', 'VM.Migrate',
  'VM.Monitor', 'VM.PowerMgmt', 'VM.Snapshot', 'VM.Snapshot.Rollback',
];

/** A few of PVE's built-in roles, by the privileges they hold. */
const ROLES: Record<string, string[]> = {
  Administrator: PRIVILEGES,
  PVEAuditor: PRIVILEGES.filter((p) => /\.Audit$/.test(p)),
  PVEVMAdmin: PRIVILEGES.filter((p) => p.startsWith('VM.')).concat(['Datastore.AllocateSpace', 'Datastore.Audit', 'Pool.Audit', 'Sys.Audit', 'Sys.Console', 'SDN.Use']),
  PVEDatastoreAdmin: ['Datastore.Allocate', 'Datastore.AllocateSpace', 'Datastore.AllocateTemplate', 'Datastore.Audit'],
};

/** The token every sandbox cluster has: root@pam's, without privilege separation. */
export const DEFAULT_TOKEN_ID = 'root@pam!sandbox';

const TOKEN_ID = /^([^\s:/@!]+)@([A-Za-z][A-Za-z0-9.\-_]+)!([A-Za-z][A-Za-z0-9.\-_]+)$/;

function tokensFile(dir: string): string {
  return path.join(clusterPaths(dir).apiDir, 'tokens.json');
}

export function loadTokens(dir: string): ApiToken[] {
  const raw = readIfExists(tokensFile(dir));
  return raw ? (JSON.parse(raw) as ApiToken[]) : [];
}

/**
 * Adds (or replaces) a token; returns it with its secret. Without `secret` a random UUID
 * is made, as `pveum user token add` does.
 */
export function addToken(dir: string, t: { tokenid: string; secret?: string; privsep?: boolean; acl?: AclEntry[]; expire?: number }): ApiToken {
  if (!TOKEN_ID.test(t.tokenid)) throw new Error(`value '${t.tokenid}' does not look like a valid token ID`);
  for (const e of t.acl ?? []) {
    for (const p of e.privs) if (!PRIVILEGES.includes(p) && !ROLES[p]) throw new Error(`invalid privilege or role '${p}'`);
  }
  const token: ApiToken = { tokenid: t.tokenid, secret: t.secret ?? randomUUID(), privsep: t.privsep ?? true, acl: t.acl ?? [], ...(t.expire ? { expire: t.expire } : {}) };
  fs.mkdirSync(clusterPaths(dir).apiDir, { recursive: true });
  withLock(path.join(clusterPaths(dir).locksDir, 'tokens.lock'), 10_000, () => {
    const tokens = loadTokens(dir).filter((x) => x.tokenid !== token.tokenid);
    writeFileAtomic(tokensFile(dir), JSON.stringify([...tokens, token], null, 2) + '\n', 0o600);
  });
  return token;
}

/** The default token, made on the cluster's first start and kept across restarts. */
export function ensureDefaultToken(dir: string): ApiToken {
  return loadTokens(dir).find((t) => t.tokenid === DEFAULT_TOKEN_ID) ?? addToken(dir, { tokenid: DEFAULT_TOKEN_ID, privsep: false });
}

/** The `Authorization` header value a client sends for a token. */
export const authHeader = (t: ApiToken) => `PVEAPIToken=${t.tokenid}=${t.secret}`;

/**
 * PVE::AccessControl::verify_token behind the header's `PVEAPIToken=` value; returns the
 * token id (the API's user for this request) or throws the reason (which the server logs,
 * and answers only `Authentication failed!`).
 */
export function verifyToken(dir: string, value: string): ApiToken {
  const m = /^(.*)=(.*)$/.exec(value);
  if (!m) throw new Error('no tokenid specified');
  const [, tokenid, secret] = m;
  const parsed = TOKEN_ID.exec(tokenid);
  if (!parsed) throw new Error(`value '${tokenid}' does not look like a valid token ID`);
  const token = loadTokens(dir).find((t) => t.tokenid === tokenid);
  if (!token) throw new Error(`no such token '${parsed[3]}' for user '${parsed[1]}@${parsed[2]}'`);
  if (token.expire && token.expire < Date.now() / 1000) throw new Error(`token '${parsed[3]}' access expired`);
  const a = Buffer.from(secret);
  const b = Buffer.from(token.secret);
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new Error('invalid token value!');
  return token;
}

const covers = (aclPath: string, p: string) => aclPath === '/' || p === aclPath || p.startsWith(aclPath.replace(/\/$/, '') + '/');

/** The privileges `token` has on `p` (RPCEnvironment::permissions). */
export function privilegesOn(token: ApiToken, p: string): Set<string> {
  if (!token.privsep && token.tokenid.startsWith('root@pam!')) return new Set(PRIVILEGES);
  const out = new Set<string>();
  for (const e of token.acl) {
    if (!covers(e.path, p)) continue;
    for (const priv of e.privs) for (const x of ROLES[priv] ?? [priv]) out.add(x);
  }
  return out;
}
