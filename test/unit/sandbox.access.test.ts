import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addToken, addUser, loadAccess, loadTokens, privilegeError, privilegesOn, type ApiToken } from '../../sandbox/api/access';
import { agentPrivileges } from '../../sandbox/api/routes/qemu';
import { pveum } from '../../sandbox/cli/pveum';
import type { Ctx } from '../../sandbox/cli/context';
import { defaultModel, PVE_RELEASES, saveModel, type ClusterModel, type PveRelease } from '../../sandbox/state/model';
import { docsTokenRecipe } from '../support/docsToken';

/**
 * The sandbox's API privileges as pve-access-control computes them
 * (PVE/RPCEnvironment.pm, `permissions`): a privilege-separated token has what both its
 * own ACL and its user's grant. And the token recipes of docs/proxmox-api.md, run through
 * the sandbox's pveum on the release each is for, make a token that may do what QemuRun
 * does there.
 */
let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-access-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A shell line's words: '…' and "…" quoting, as bash splits the recipe. */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** The cluster's model, playing `release` from now on (as after an upgrade). */
function playing(release: PveRelease): ClusterModel {
  const model = defaultModel({ nodes: ['pve1', 'pve2'], mainNode: 'pve1', gateway: '127.0.0.1', vmSshPort: 22, bootDelayMs: 0, nodeHost: '127.0.0.1', pveVersion: PVE_RELEASES[release] });
  saveModel(dir, model);
  return model;
}

/** A pveum call's context on pve1 of a cluster playing `release`. */
function ctxOn(release: PveRelease, out: string[]): Ctx {
  return { dir, node: 'pve1', model: playing(release), out: (l: string) => out.push(l), err: (l: string) => out.push(l) } as unknown as Ctx;
}

function runRecipe(recipe: string, release: PveRelease = '9.1'): string {
  const out: string[] = [];
  const ctx = ctxOn(release, out);
  for (const line of recipe.split('\n').filter((l) => l.trim() && !l.startsWith('#'))) {
    const [cmd, ...args] = words(line);
    expect(cmd).toBe('pveum');
    expect(pveum(ctx, args)).toBe(0);
  }
  return out.join('\n');
}

const token = (id: string): ApiToken => loadTokens(dir).find((t) => t.tokenid === id)!;
const can = (t: ApiToken, p: string, privs: string[], release: PveRelease = '9.1') => {
  const have = privilegesOn(t, p, loadAccess(dir), release);
  return privs.every((x) => have.has(x));
};
/** qemu-server Agent.pm's check: any one of the command's privileges. */
const mayAgent = (t: ApiToken, command: 'file-read' | 'network-get-interfaces', release: PveRelease) =>
  agentPrivileges(release, command).some((p) => can(t, '/vms/120', [p], release));

/** download-url's check (pve-storage PVE/API2/Storage/Status.pm). */
const mayDownload = (t: ApiToken, release: PveRelease = '9.1') =>
  can(t, '/storage/local', ['Datastore.AllocateTemplate'], release) &&
  (can(t, '/', ['Sys.Audit', 'Sys.Modify'], release) || can(t, '/nodes/pve1', ['Sys.AccessNetwork'], release));

/**
 * A template install's clone as the REST API checks it (qemu-server clone_vm): the template,
 * the new VM, the template's disks' storage, its bridge; and the bridge in the node's
 * network list (pve-manager Network.pm `index`: SDN.Audit or SDN.Use on it).
 */
const mayClone = (t: ApiToken, release: PveRelease) =>
  can(t, '/vms/9000', ['VM.Clone'], release) &&
  can(t, '/vms/120', ['VM.Allocate'], release) &&
  can(t, '/storage/local-lvm', ['Datastore.AllocateSpace'], release) &&
  can(t, '/sdn/zones/localnetwork/vmbr0', ['SDN.Use'], release);
const maySeeBridge = (t: ApiToken, release: PveRelease) => ['SDN.Audit', 'SDN.Use'].some((p) => can(t, '/sdn/zones/localnetwork/vmbr1', [p], release));

test("a privilege-separated token's role on the token alone gives it nothing", () => {
  runRecipe(`pveum role add QemuRun --privs "VM.Allocate VM.Audit"
pveum user add qemurun@pve --comment "QemuRun service"
pveum user token add qemurun@pve service --privsep 1
pveum acl modify / --tokens 'qemurun@pve!service' --roles QemuRun`);
  expect(can(token('qemurun@pve!service'), '/vms/120', ['VM.Audit'])).toBe(false);
});

describe.each(['9.1', '8.4'] as const)('on Proxmox VE %s', (release) => {
  test('the docs recipe makes a token that may create, clone, configure, migrate, download, see the bridges and ask the guest agent', () => {
    const printed = runRecipe(docsTokenRecipe(release), release);
    expect(printed).toMatch(/│ full-tokenid │ qemurun@pve!service\s*│/);
    const secret = /│ value\s*│ (\S+)/.exec(printed)![1];
    const t = token('qemurun@pve!service');
    expect(t.secret).toBe(secret);
    expect(t.privsep).toBe(true);
    for (const p of ['VM.Allocate', 'VM.Clone', 'VM.Config.Disk', 'VM.Config.Cloudinit', 'VM.Migrate', 'VM.PowerMgmt']) expect([p, can(t, '/vms/120', [p], release)]).toEqual([p, true]);
    expect(can(t, '/storage/local-lvm', ['Datastore.AllocateSpace', 'Datastore.Audit'], release)).toBe(true);
    expect(can(t, '/nodes/pve2', ['Sys.Audit'], release)).toBe(true);
    expect(can(t, '/sdn/zones/localnetwork/vmbr0', ['SDN.Use'], release)).toBe(true);
    expect(mayDownload(t, release)).toBe(true);
    expect(mayClone(t, release)).toBe(true);
    expect(maySeeBridge(t, release)).toBe(true);
    // The host key (file-read) and a DHCP install's address (network-get-interfaces).
    expect(mayAgent(t, 'file-read', release)).toBe(true);
    expect(mayAgent(t, 'network-get-interfaces', release)).toBe(true);
    // The narrow form of download-url's check: not Sys.Modify, which would change the cluster.
    expect(can(t, '/', ['Sys.Modify'], release)).toBe(false);
    // Nor a guest agent that runs commands.
    expect(can(t, '/vms/120', ['VM.GuestAgent.Unrestricted'], release)).toBe(false);
  });

  test('the privilege table of docs/proxmox-api.md, each on its path, is enough for a download, a clone, the bridges and the guest agent', () => {
    const text = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'proxmox-api.md'), 'utf8');
    const rows = [...text.matchAll(/^\| (`[A-Z][^|]*) \| `(\/[a-z/]*)[^`]*` \|/gm)].map((m) => ({
      privs: [...m[1].matchAll(/`([^`]+)`/g)].map((x) => x[1]).map((p, _i, all) => (p.startsWith('.') ? all[0].replace(/\.[^.]+$/, '') + p : p)),
      path: m[2].replace(/\/$/, '') || '/',
    }));
    expect(rows.length).toBeGreaterThan(5);
    // The table names both releases' guest agent privileges; each release takes its own.
    const acl = rows.map((r) => ({ path: r.path, privs: r.privs.filter((p) => !privilegeError(release, p)) }));
    expect(acl.flatMap((e) => e.privs)).toContain(release === '9.1' ? 'VM.GuestAgent.FileRead' : 'VM.Monitor');
    playing(release);
    addUser(dir, { userid: 'qemurun@pve', acl });
    const t = addToken(dir, { tokenid: 'qemurun@pve!narrow', acl });
    expect(mayDownload(t, release)).toBe(true);
    expect(can(t, '/vms/120', ['VM.Allocate'], release)).toBe(true);
    expect(mayClone(t, release)).toBe(true);
    expect(maySeeBridge(t, release)).toBe(true);
    expect(mayAgent(t, 'file-read', release)).toBe(true);
    expect(mayAgent(t, 'network-get-interfaces', release)).toBe(true);
  });
});

test("each release's pveum refuses the other's privileges with Proxmox's words, before making the role", () => {
  const refused = (release: PveRelease, privs: string) => {
    try {
      runRecipe(`pveum role add Old -privs '${privs}'`, release);
    } catch (err) {
      return [(err as { exitCode: number }).exitCode, (err as Error).message];
    }
    return 'accepted';
  };
  expect(refused('9.1', 'VM.Monitor')).toEqual([255, "400 Parameter verification failed.\nprivs: invalid format - invalid privilege 'VM.Monitor'\npveum role add <roleid> [OPTIONS]"]);
  expect(refused('8.4', 'VM.Audit,VM.GuestAgent.Audit')).toEqual([255, "400 Parameter verification failed.\nprivs: invalid format - invalid privilege 'VM.GuestAgent.Audit'\npveum role add <roleid> [OPTIONS]"]);
  expect(loadAccess(dir).roles).toEqual({});
  // The 8.4 recipe's role line on 9, as an operator would paste it.
  expect(() => runRecipe(docsTokenRecipe('8.4').split('\n')[0], '9.1')).toThrow("privs: invalid format - invalid privilege 'VM.Monitor'");
});

test('a role made on 8.4 loses VM.Monitor on 9, and role modify --append gives it the guest agent privileges', () => {
  runRecipe(docsTokenRecipe('8.4'), '8.4');
  const t = token('qemurun@pve!service');
  expect(mayAgent(t, 'network-get-interfaces', '8.4')).toBe(true);
  // The cluster upgraded: the same user.cfg, read by 9.
  expect(mayAgent(t, 'network-get-interfaces', '9.1')).toBe(false);
  expect(mayAgent(t, 'file-read', '9.1')).toBe(false);
  expect(can(t, '/vms/120', ['VM.Allocate'], '9.1')).toBe(true);
  runRecipe('pveum role modify QemuRun --privs VM.GuestAgent.Audit,VM.GuestAgent.FileRead --append 1', '9.1');
  expect(mayAgent(t, 'network-get-interfaces', '9.1')).toBe(true);
  expect(mayAgent(t, 'file-read', '9.1')).toBe(true);
  expect(can(t, '/vms/120', ['VM.Allocate'], '9.1')).toBe(true);
  expect(loadAccess(dir).roles.QemuRun).not.toContain('VM.Monitor');
  expect(() => runRecipe('pveum role modify PVEAuditor --privs VM.Audit', '9.1')).toThrow("update role failed: auto-generated role 'PVEAuditor' cannot be modified");
});

test("root@pam's privilege-separated tokens have their own ACL as is; another user's unseparated token its user's", () => {
  const rootSep = addToken(dir, { tokenid: 'root@pam!ci', acl: [{ path: '/vms', privs: ['VM.Audit'] }] });
  expect(can(rootSep, '/vms/100', ['VM.Audit'])).toBe(true);
  expect(can(rootSep, '/vms/100', ['VM.Allocate'])).toBe(false);
  expect(can(addToken(dir, { tokenid: 'root@pam!all', privsep: false }), '/vms/100', ['VM.Allocate'])).toBe(true);
  addUser(dir, { userid: 'ops@pve', acl: [{ path: '/vms', privs: ['PVEAuditor'] }] });
  const whole = addToken(dir, { tokenid: 'ops@pve!whole', privsep: false, acl: [{ path: '/', privs: ['Administrator'] }] });
  expect(can(whole, '/vms/100', ['VM.Audit'])).toBe(true);
  expect(can(whole, '/vms/100', ['VM.Allocate'])).toBe(false);
  expect(() => addToken(dir, { tokenid: 'nobody@pve!xx' })).toThrow("no such user ('nobody@pve')");
});
