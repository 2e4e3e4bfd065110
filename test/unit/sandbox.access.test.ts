import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addToken, addUser, loadAccess, loadTokens, privilegesOn, type ApiToken } from '../../sandbox/api/access';
import { pveum } from '../../sandbox/cli/pveum';
import type { Ctx } from '../../sandbox/cli/context';
import { docsTokenRecipe } from '../support/docsToken';

/**
 * The sandbox's API privileges as pve-access-control computes them
 * (PVE/RPCEnvironment.pm, `permissions`): a privilege-separated token has what both its
 * own ACL and its user's grant. And the token recipe of docs/proxmox-api.md, run through
 * the sandbox's pveum, makes a token that may do what QemuRun does.
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

function runRecipe(recipe: string): string {
  const out: string[] = [];
  const ctx = { dir, node: 'pve1', out: (l: string) => out.push(l), err: (l: string) => out.push(l) } as unknown as Ctx;
  for (const line of recipe.split('\n').filter((l) => l.trim() && !l.startsWith('#'))) {
    const [cmd, ...args] = words(line);
    expect(cmd).toBe('pveum');
    expect(pveum(ctx, args)).toBe(0);
  }
  return out.join('\n');
}

const token = (id: string): ApiToken => loadTokens(dir).find((t) => t.tokenid === id)!;
const can = (t: ApiToken, p: string, privs: string[]) => {
  const have = privilegesOn(t, p, loadAccess(dir));
  return privs.every((x) => have.has(x));
};

/** download-url's check (pve-storage PVE/API2/Storage/Status.pm). */
const mayDownload = (t: ApiToken) =>
  can(t, '/storage/local', ['Datastore.AllocateTemplate']) && (can(t, '/', ['Sys.Audit', 'Sys.Modify']) || can(t, '/nodes/pve1', ['Sys.AccessNetwork']));

test("a privilege-separated token's role on the token alone gives it nothing", () => {
  runRecipe(`pveum role add QemuRun --privs "VM.Allocate VM.Audit"
pveum user add qemurun@pve --comment "QemuRun service"
pveum user token add qemurun@pve service --privsep 1
pveum acl modify / --tokens 'qemurun@pve!service' --roles QemuRun`);
  expect(can(token('qemurun@pve!service'), '/vms/120', ['VM.Audit'])).toBe(false);
});

test('the docs recipe makes a token that may create, configure, migrate and download', () => {
  const printed = runRecipe(docsTokenRecipe());
  expect(printed).toMatch(/│ full-tokenid │ qemurun@pve!service\s*│/);
  const secret = /│ value\s*│ (\S+)/.exec(printed)![1];
  const t = token('qemurun@pve!service');
  expect(t.secret).toBe(secret);
  expect(t.privsep).toBe(true);
  for (const p of ['VM.Allocate', 'VM.Clone', 'VM.Config.Disk', 'VM.Config.Cloudinit', 'VM.Migrate', 'VM.PowerMgmt']) expect([p, can(t, '/vms/120', [p])]).toEqual([p, true]);
  expect(can(t, '/storage/local-lvm', ['Datastore.AllocateSpace', 'Datastore.Audit'])).toBe(true);
  expect(can(t, '/nodes/pve2', ['Sys.Audit'])).toBe(true);
  expect(can(t, '/sdn/zones/localnetwork/vmbr0', ['SDN.Use'])).toBe(true);
  expect(mayDownload(t)).toBe(true);
  // The narrow form of download-url's check: not Sys.Modify, which would change the cluster.
  expect(can(t, '/', ['Sys.Modify'])).toBe(false);
});

test('the privilege table of docs/proxmox-api.md, each on its path, is enough for a download', () => {
  const text = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'proxmox-api.md'), 'utf8');
  const rows = [...text.matchAll(/^\| (`[A-Z][^|]*) \| `(\/[a-z/]*)[^`]*` \|/gm)].map((m) => ({
    privs: [...m[1].matchAll(/`([^`]+)`/g)].map((x) => x[1]).map((p, _i, all) => (p.startsWith('.') ? all[0].replace(/\.[^.]+$/, '') + p : p)),
    path: m[2].replace(/\/$/, '') || '/',
  }));
  expect(rows.length).toBeGreaterThan(5);
  const acl = rows.map((r) => ({ path: r.path === '/storage' ? '/storage' : r.path, privs: r.privs }));
  addUser(dir, { userid: 'qemurun@pve', acl });
  const t = addToken(dir, { tokenid: 'qemurun@pve!narrow', acl });
  expect(mayDownload(t)).toBe(true);
  expect(can(t, '/vms/120', ['VM.Allocate'])).toBe(true);
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
