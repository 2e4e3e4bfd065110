import fs from 'node:fs';
import path from 'node:path';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { clusterPaths } from '../state/paths';
import { readIfExists, withLock, writeFileAtomic } from '../state/files';
import { DEFAULT_PVE_RELEASE, loadModel, majorOf, nodePveVersion } from '../state/model';

/**
 * Users, roles, API tokens and their privileges (user.cfg's users, roles, tokens and acl
 * entries, as far as the sandbox needs them). A token is `user@realm!tokenid` with a UUID
 * secret and belongs to a user. ACL entries grant privileges (or roles) on a path,
 * inherited by the paths below it (`/` covers everything, `/vms/100` only that VM); users
 * and tokens have entries of their own. What a token may do is computed as
 * PVE::RPCEnvironment::permissions does (see `privilegesOn`): root@pam is every privilege;
 * a token without privilege separation has its user's privileges; a privilege-separated
 * one has those that both its own ACL and its user's grant.
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
  /**
   * Privilege separation: true = what both the ACL below and the user's grant (root@pam's
   * own tokens: the ACL below alone), false = the user's privileges.
   */
  privsep: boolean;
  acl: AclEntry[];
  /** Unix seconds; 0 or absent = never. */
  expire?: number;
}

/**
 * Every privilege of Proxmox VE 8 (pve-access-control stable-bookworm, PVE/AccessControl.pm:
 * `$privgroups` and `$valid_privs`).
 */
const PRIVILEGES_8 = [
  'Datastore.Allocate', 'Datastore.AllocateSpace', 'Datastore.AllocateTemplate', 'Datastore.Audit',
  'Group.Allocate', 'Mapping.Audit', 'Mapping.Modify', 'Mapping.Use', 'Permissions.Modify',
  'Pool.Allocate', 'Pool.Audit', 'Realm.Allocate', 'Realm.AllocateUser', 'SDN.Allocate', 'SDN.Audit',
  'SDN.Use', 'Sys.AccessNetwork', 'Sys.Audit', 'Sys.Console', 'Sys.Incoming', 'Sys.Modify',
  'Sys.PowerMgmt', 'Sys.Syslog', 'User.Modify', 'VM.Allocate', 'VM.Audit', 'VM.Backup', 'VM.Clone',
  'VM.Config.CDROM', 'VM.Config.CPU', 'VM.Config.Cloudinit', 'VM.Config.Disk', 'VM.Config.HWType',
  'VM.Config.Memory', 'VM.Config.Network', 'VM.Config.Options', 'VM.Console', 'VM.Migrate',
  'VM.Monitor', 'VM.PowerMgmt', 'VM.Snapshot', 'VM.Snapshot.Rollback',
];

/**
 * Proxmox VE 9's (pve-access-control master, the same file): the guest agent's privileges
 * came in (commit "add VM.GuestAgent privileges"), `VM.Monitor` went (commit "privileges:
 * drop VM.Monitor"; the HMP monitor now wants Sys.Audit) and `VM.Replicate` came (commit
 * "add VM.Replicate privilege"), all before 9.0's release.
 */
const PRIVILEGES_9 = [
  ...PRIVILEGES_8.filter((p) => p !== 'VM.Monitor'),
  'VM.GuestAgent.Audit', 'VM.GuestAgent.FileRead', 'VM.GuestAgent.FileSystemMgmt', 'VM.GuestAgent.FileWrite',
  'VM.GuestAgent.Unrestricted', 'VM.Replicate',
].sort();

/** The privileges a node of this release (`9.1`, `8.4`) knows; 8's for anything older than 9. */
export function privilegesOf(release: string): readonly string[] {
  return majorOf(release) >= 9 ? PRIVILEGES_9 : PRIVILEGES_8;
}

/** A user of user.cfg other than root@pam (which always exists and has every privilege). */
export interface ApiUser {
  userid: string;
  acl: AclEntry[];
}

/** user.cfg's users (but root@pam) and the roles `pveum role add` made. */
export interface AccessConfig {
  users: ApiUser[];
  roles: Record<string, string[]>;
}

/** A few of PVE's built-in roles, by the privileges they hold on a node of this release. */
function builtinRoles(release: string): Record<string, readonly string[]> {
  const all = privilegesOf(release);
  return {
    Administrator: all,
    PVEAuditor: all.filter((p) => /\.Audit$/.test(p)),
    PVEVMAdmin: all.filter((p) => p.startsWith('VM.')).concat(['Datastore.AllocateSpace', 'Datastore.Audit', 'Pool.Audit', 'Sys.Audit', 'Sys.Console', 'SDN.Use']),
    PVEDatastoreAdmin: ['Datastore.Allocate', 'Datastore.AllocateSpace', 'Datastore.AllocateTemplate', 'Datastore.Audit'],
  };
}

const isBuiltinRole = (name: string) => name in builtinRoles(DEFAULT_PVE_RELEASE);

/**
 * pve-access-control's `verify_privname` (PVE/AccessControl.pm; the `pve-priv` format of
 * `pveum role add|modify --privs`, and `add_role_privs`): the text a node of `release`
 * refuses a privilege it does not know with, or undefined for one it knows.
 */
export function privilegeError(release: string, priv: string): string | undefined {
  return privilegesOf(release).includes(priv) ? undefined : `invalid privilege '${priv}'`;
}

/**
 * The release of the cluster's main node, whose API server the tests' helpers stand for;
 * the default release for access files of no cluster.
 */
function clusterRelease(dir: string): string {
  if (!fs.existsSync(clusterPaths(dir).clusterJson)) return DEFAULT_PVE_RELEASE;
  const model = loadModel(dir);
  return nodePveVersion(model, model.mainNode).release;
}

/** The token every sandbox cluster has: root@pam's, without privilege separation. */
const DEFAULT_TOKEN_ID = 'root@pam!sandbox';

const TOKEN_ID = /^([^\s:/@!]+)@([A-Za-z][A-Za-z0-9.\-_]+)!([A-Za-z][A-Za-z0-9.\-_]+)$/;

function tokensFile(dir: string): string {
  return path.join(clusterPaths(dir).apiDir, 'tokens.json');
}

function usersFile(dir: string): string {
  return path.join(clusterPaths(dir).apiDir, 'users.json');
}

const lockFile = (dir: string) => path.join(clusterPaths(dir).locksDir, 'tokens.lock');

export function loadAccess(dir: string): AccessConfig {
  const raw = readIfExists(usersFile(dir));
  return raw ? (JSON.parse(raw) as AccessConfig) : { users: [], roles: {} };
}

function saveAccess(dir: string, cfg: AccessConfig): void {
  writeFileAtomic(usersFile(dir), JSON.stringify(cfg, null, 2) + '\n', 0o600);
}

/** Changes users.json under the lock tokens.json is written under (user.cfg is one file on PVE). */
function updateAccess<T>(dir: string, fn: (cfg: AccessConfig, tokens: ApiToken[]) => T): T {
  fs.mkdirSync(clusterPaths(dir).apiDir, { recursive: true });
  return withLock(lockFile(dir), 10_000, () => {
    const cfg = loadAccess(dir);
    const tokens = loadTokens(dir);
    const out = fn(cfg, tokens);
    saveAccess(dir, cfg);
    writeFileAtomic(tokensFile(dir), JSON.stringify(tokens, null, 2) + '\n', 0o600);
    return out;
  });
}

const ROOT_USER = 'root@pam';

/** `user@realm` of `user@realm!tokenid` (PVE::AccessControl::split_tokenid). */
const userOfToken = (tokenid: string) => tokenid.replace(/!.*$/, '');

/** PVE::AccessControl::check_user_exist's error for a user user.cfg does not have. */
function userExists(cfg: AccessConfig, userid: string): boolean {
  return userid === ROOT_USER || cfg.users.some((u) => u.userid === userid);
}

/** Adds a user (`pveum user add`), optionally with ACL entries of its own. */
export function addUser(dir: string, u: { userid: string; acl?: AclEntry[] }): void {
  if (!/^[^\s:/@!]+@[A-Za-z][A-Za-z0-9.\-_]+$/.test(u.userid)) throw new Error(`value '${u.userid}' does not look like a valid user name`);
  updateAccess(dir, (cfg) => {
    if (userExists(cfg, u.userid)) throw new Error(`user '${u.userid}' already exists`);
    checkAcl(cfg, u.acl ?? [], clusterRelease(dir));
    cfg.users.push({ userid: u.userid, acl: u.acl ?? [] });
  });
}

/** ACL entries of the test helpers, which may name privileges as well as roles. */
function checkAcl(cfg: AccessConfig, acl: AclEntry[], release: string): void {
  const roles = builtinRoles(release);
  for (const e of acl) {
    for (const p of e.privs) if (privilegeError(release, p) && !roles[p] && !cfg.roles[p]) throw new Error(`invalid privilege or role '${p}'`);
  }
}

export function loadTokens(dir: string): ApiToken[] {
  const raw = readIfExists(tokensFile(dir));
  return raw ? (JSON.parse(raw) as ApiToken[]) : [];
}

/**
 * Adds (or replaces) a token of an existing user; returns it with its secret. Without
 * `secret` a random UUID is made, as `pveum user token add` does. The user must exist
 * (API2/User.pm's generate_token: check_user_exist, `no such user ('…')`).
 */
export function addToken(dir: string, t: { tokenid: string; secret?: string; privsep?: boolean; acl?: AclEntry[]; expire?: number }): ApiToken {
  if (!TOKEN_ID.test(t.tokenid)) throw new Error(`value '${t.tokenid}' does not look like a valid token ID`);
  const token: ApiToken = { tokenid: t.tokenid, secret: t.secret ?? randomUUID(), privsep: t.privsep ?? true, acl: t.acl ?? [], ...(t.expire ? { expire: t.expire } : {}) };
  updateAccess(dir, (cfg, tokens) => {
    const user = userOfToken(t.tokenid);
    if (!userExists(cfg, user)) throw new Error(`no such user ('${user}')`);
    checkAcl(cfg, token.acl, clusterRelease(dir));
    tokens.splice(0, tokens.length, ...tokens.filter((x) => x.tokenid !== token.tokenid), token);
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
  // check_user_enabled before check_token_exist, as verify_token does.
  if (!userExists(loadAccess(dir), `${parsed[1]}@${parsed[2]}`)) throw new Error(`no such user ('${parsed[1]}@${parsed[2]}')`);
  const token = loadTokens(dir).find((t) => t.tokenid === tokenid);
  if (!token) throw new Error(`no such token '${parsed[3]}' for user '${parsed[1]}@${parsed[2]}'`);
  if (token.expire && token.expire < Date.now() / 1000) throw new Error(`token '${parsed[3]}' access expired`);
  const a = Buffer.from(secret);
  const b = Buffer.from(token.secret);
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new Error('invalid token value!');
  return token;
}

const covers = (aclPath: string, p: string) => aclPath === '/' || p === aclPath || p.startsWith(aclPath.replace(/\/$/, '') + '/');

/**
 * What `acl` grants on `p` on a node of `release`. A privilege that release does not know
 * grants nothing: a node reads user.cfg's roles so (PVE/AccessControl.pm,
 * `parse_user_config`: "user config - ignore invalid privilege"), which is how a role
 * made on 8 loses `VM.Monitor` when its cluster is upgraded to 9.
 */
function granted(cfg: AccessConfig, acl: AclEntry[], p: string, release: string): Set<string> {
  const roles = builtinRoles(release);
  const known = privilegesOf(release);
  const out = new Set<string>();
  for (const e of acl) {
    if (!covers(e.path, p)) continue;
    for (const priv of e.privs) for (const x of roles[priv] ?? cfg.roles[priv] ?? [priv]) if (known.includes(x)) out.add(x);
  }
  return out;
}

/**
 * The privileges `token` has on `p`, as pve-access-control's PVE/RPCEnvironment.pm
 * `permissions` and `$compile_acl_path` compute them: the owning user's privileges
 * (root@pam: all) for a token without privilege separation; for a privilege-separated
 * token, those its own ACL grants that its user has too ("intersect user and token
 * permissions"), except for root@pam's tokens, whose own ACL is taken as is. `release` is
 * that of the node that checks (`9.1`, `8.4`): its privileges are the ones there are.
 */
export function privilegesOn(token: ApiToken, p: string, cfg: AccessConfig, release: string): Set<string> {
  const userid = userOfToken(token.tokenid);
  const user = cfg.users.find((u) => u.userid === userid);
  const userPrivs = userid === ROOT_USER ? new Set(privilegesOf(release)) : granted(cfg, user?.acl ?? [], p, release);
  if (!token.privsep) return userPrivs;
  const own = granted(cfg, token.acl, p, release);
  if (userid === ROOT_USER) return own;
  return new Set([...own].filter((x) => userPrivs.has(x)));
}

/**
 * The names of the ACL tree's nodes just below `p` (pve-access-control
 * PVE/AccessControl.pm `find_acl_tree_node`'s `children`): every path that an ACL entry of
 * user.cfg (a user's or a token's, whoever it is for) names below `p`, cut after the next
 * component. RPCEnvironment.pm `check_sdn_bridge` tries a bridge's VLANs so.
 */
export function aclChildren(dir: string, p: string): string[] {
  const prefix = p.replace(/\/$/, '') + '/';
  const paths = [...loadAccess(dir).users.flatMap((u) => u.acl), ...loadTokens(dir).flatMap((t) => t.acl)].map((e) => e.path);
  return [...new Set(paths.filter((x) => x.startsWith(prefix) && x.length > prefix.length).map((x) => x.slice(prefix.length).split('/')[0]))].sort();
}

/** PVE/AccessControl.pm `add_role_privs`: each privilege must be one the node knows. */
function checkPrivileges(privs: string[], release: string): void {
  for (const p of privs) {
    const err = privilegeError(release, p);
    if (err) throw new Error(err);
  }
}

/**
 * `pveum role add <roleid> --privs …` (API2/Role.pm create_role) on a node of `release`:
 * a role of its own, usable in ACL entries like the built-in ones.
 */
export function addRole(dir: string, roleid: string, privs: string[], release = clusterRelease(dir)): void {
  updateAccess(dir, (cfg) => {
    if (isBuiltinRole(roleid) || cfg.roles[roleid]) throw new Error(`role '${roleid}' already exists`);
    checkPrivileges(privs, release);
    cfg.roles[roleid] = [...new Set(privs)];
  });
}

/**
 * `pveum role modify <roleid> --privs … [--append 1]` (API2/Role.pm update_role) on a node
 * of `release`: the role's privileges replaced, or added to. The role is read as that node
 * parses user.cfg, so an `--append` on 9 drops a `VM.Monitor` that 8 wrote.
 */
export function modifyRole(dir: string, roleid: string, privs: string[], append: boolean, release = clusterRelease(dir)): void {
  if (isBuiltinRole(roleid)) throw new Error(`auto-generated role '${roleid}' cannot be modified`);
  updateAccess(dir, (cfg) => {
    const role = cfg.roles[roleid];
    if (!role) throw new Error(`role '${roleid}' does not exist`);
    checkPrivileges(privs, release);
    const kept = append ? role.filter((p) => !privilegeError(release, p)) : [];
    cfg.roles[roleid] = [...new Set([...kept, ...privs])];
  });
}

/**
 * `pveum acl modify <path> --roles … --users …|--tokens …` (API2/ACL.pm update_acl): the
 * roles on `path` for each user and token. The roles, users and tokens must exist.
 */
export function modifyAcl(dir: string, a: { path: string; roles: string[]; users?: string[]; tokens?: string[] }): void {
  updateAccess(dir, (cfg, tokens) => {
    for (const r of a.roles) if (!isBuiltinRole(r) && !cfg.roles[r]) throw new Error(`role '${r}' does not exist`);
    for (const u of a.users ?? []) {
      if (!userExists(cfg, u)) throw new Error(`no such user ('${u}')`);
      // root@pam has every privilege whatever its ACL says.
      const user = cfg.users.find((x) => x.userid === u);
      user?.acl.push({ path: a.path, privs: a.roles });
    }
    for (const t of a.tokens ?? []) {
      const token = tokens.find((x) => x.tokenid === t);
      if (!token) {
        const m = /^(.*)!(.*)$/.exec(t);
        throw new Error(m ? `no such token '${m[2]}' for user '${m[1]}'` : `value '${t}' does not look like a valid token ID`);
      }
      token.acl.push({ path: a.path, privs: a.roles });
    }
  });
}

/**
 * `pveum user token remove <userid> <tokenid>` (API2/User.pm remove_token): the token and
 * its ACL entries go; a request with it then fails as a wrong one does.
 */
export function removeToken(dir: string, tokenid: string): void {
  updateAccess(dir, (_cfg, tokens) => {
    const i = tokens.findIndex((t) => t.tokenid === tokenid);
    const m = /^(.*)!(.*)$/.exec(tokenid);
    if (i < 0) throw new Error(`no such token '${m?.[2] ?? tokenid}' for user '${m?.[1] ?? ''}'`);
    tokens.splice(i, 1);
  });
}
