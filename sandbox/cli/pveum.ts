import { parseArgs, usageLine, type CommandDef, type Prop } from './args';
import { CliError, paramError } from './errors';
import type { Ctx } from './context';
import { toText } from './output';
import { addRole, addToken, addUser, modifyAcl, modifyRole, privilegeError, removeToken } from '../api/access';
import { nodePveVersion } from '../state/model';

/**
 * The part of `pveum` (pve-access-control's PVE/CLI/pveum.pm) that sets up an API token:
 * `role add|modify`, `user add`, `user token add|remove` and `acl modify`, writing what the
 * sandbox's REST API checks (sandbox/api/access.ts). So the recipe of docs/proxmox-api.md can be run
 * as written, on a node, and the token it prints is the one the API then judges.
 */
const list = (v: string | undefined) => (v ?? '').split(/[,;\s]+/).filter(Boolean);

/**
 * `--privs` of `role add` and `role modify`: format `pve-priv-list` (API2/Role.pm
 * `role-privs`), each name checked by the node's `verify_privname` before anything is done,
 * so an unknown one is a 400 of the parameter check (pve-common PVE/JSONSchema.pm
 * `check_format`: `privs: invalid format - invalid privilege 'VM.Monitor'`).
 */
const privsProp = (release: string): Prop => ({
  type: 'string',
  optional: true,
  format: (v) => list(v).map((p) => privilegeError(release, p)).find((e) => e !== undefined),
});

const ROLE_ID: Prop = { type: 'string', pattern: /^[A-Za-z0-9.\-_]+$/ };

const roleAdd = (release: string): CommandDef => ({
  name: 'pveum role add',
  args: ['roleid'],
  props: { roleid: ROLE_ID, privs: privsProp(release) },
});

const roleModify = (release: string): CommandDef => ({
  name: 'pveum role modify',
  args: ['roleid'],
  props: { roleid: ROLE_ID, privs: privsProp(release), append: { type: 'boolean', optional: true } },
});

const USER_ADD: CommandDef = {
  name: 'pveum user add',
  args: ['userid'],
  props: {
    userid: { type: 'string', pattern: /^[^\s:/@!]+@[A-Za-z][A-Za-z0-9.\-_]+$/ },
    comment: { type: 'string', optional: true },
    email: { type: 'string', optional: true },
    enable: { type: 'boolean', optional: true },
    expire: { type: 'integer', optional: true, minimum: 0 },
    firstname: { type: 'string', optional: true },
    lastname: { type: 'string', optional: true },
    groups: { type: 'string', optional: true },
    password: { type: 'string', optional: true },
  },
};

const TOKEN_ADD: CommandDef = {
  name: 'pveum user token add',
  args: ['userid', 'tokenid'],
  props: {
    userid: { type: 'string' },
    tokenid: { type: 'string', pattern: /^[A-Za-z][A-Za-z0-9.\-_]+$/ },
    comment: { type: 'string', optional: true },
    expire: { type: 'integer', optional: true, minimum: 0 },
    privsep: { type: 'boolean', optional: true },
    'output-format': { type: 'string', optional: true, enum: ['text', 'json', 'json-pretty', 'yaml'] },
  },
};

const TOKEN_REMOVE: CommandDef = {
  name: 'pveum user token remove',
  args: ['userid', 'tokenid'],
  props: { userid: { type: 'string' }, tokenid: { type: 'string' } },
};

const ACL_MODIFY: CommandDef = {
  name: 'pveum acl modify',
  args: ['path'],
  props: {
    path: { type: 'string' },
    roles: { type: 'string' },
    users: { type: 'string', optional: true },
    tokens: { type: 'string', optional: true },
    groups: { type: 'string', optional: true },
    propagate: { type: 'boolean', optional: true },
  },
};

/** API2's lock_user_config(..., $errmsg): the failure is prefixed with what was done. */
function failing<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw new CliError(`${what}: ${(e as Error).message}`);
  }
}

export function pveum(ctx: Ctx, argv: string[]): number {
  const words = argv.slice(0, 3).join(' ');
  // The privileges are the ones the node it runs on knows.
  const release = nodePveVersion(ctx.model, ctx.node).release;
  if (words.startsWith('role add')) {
    const p = parseArgs(roleAdd(release), argv.slice(2));
    failing('create role failed', () => addRole(ctx.dir, p.roleid, list(p.privs), release));
    return 0;
  }
  if (words.startsWith('role modify')) {
    const def = roleModify(release);
    const p = parseArgs(def, argv.slice(2));
    // update_role's schema: `append` requires `privs` (pve-common JSONSchema.pm check_object).
    if (p.append !== undefined && p.privs === undefined) throw paramError({ privs: "missing property required by 'append'" }, usageLine(def));
    failing('update role failed', () => modifyRole(ctx.dir, p.roleid, list(p.privs), p.append === '1', release));
    return 0;
  }
  if (words === 'user token add') {
    const p = parseArgs(TOKEN_ADD, argv.slice(3));
    const tokenid = `${p.userid}!${p.tokenid}`;
    const privsep = p.privsep === undefined ? true : p.privsep === '1';
    const t = failing('generating token failed', () =>
      addToken(ctx.dir, { tokenid, privsep, ...(p.expire ? { expire: Number(p.expire) } : {}) }),
    );
    const res = { 'full-tokenid': tokenid, info: { privsep: privsep ? '1' : '0', ...(p.expire ? { expire: p.expire } : {}) }, value: t.secret };
    ctx.out(p['output-format']?.startsWith('json') ? JSON.stringify(res) : toText(res, true, true));
    return 0;
  }
  if (words === 'user token remove') {
    const p = parseArgs(TOKEN_REMOVE, argv.slice(3));
    failing('deleting token failed', () => removeToken(ctx.dir, `${p.userid}!${p.tokenid}`));
    return 0;
  }
  if (words.startsWith('user add')) {
    const p = parseArgs(USER_ADD, argv.slice(2));
    failing('create user failed', () => addUser(ctx.dir, { userid: p.userid }));
    return 0;
  }
  if (words.startsWith('acl modify')) {
    const p = parseArgs(ACL_MODIFY, argv.slice(2));
    if (!p.users && !p.tokens && !p.groups) throw new CliError('either \'users\', \'groups\' or \'tokens\' is required');
    if (p.groups) throw new CliError('ACL update failed: the sandbox has no groups');
    const aclPath = p.path.replace(/\/+$/, '') || '/';
    failing('ACL update failed', () => modifyAcl(ctx.dir, { path: aclPath, roles: list(p.roles), users: list(p.users), tokens: list(p.tokens) }));
    return 0;
  }
  throw new CliError(
    `ERROR: ${argv.length ? `unknown command 'pveum ${argv.join(' ')}'` : 'no command specified'}\nUSAGE: pveum <COMMAND> [ARGS] [OPTIONS]\n\n` +
      '       pveum acl modify <path> --roles <string> [OPTIONS]\n       pveum role add <roleid> [OPTIONS]\n       pveum role modify <roleid> [OPTIONS]\n' +
      '       pveum user add <userid> [OPTIONS]\n       pveum user token add <userid> <tokenid> [OPTIONS]\n       pveum user token remove <userid> <tokenid>\n',
  );
}
