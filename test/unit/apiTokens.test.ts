import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findToken, parseApiTokens, roleAtLeast, sha256 } from '../../lib/apiTokens';
import { loadConfig } from '../../lib/config';
import { ensureDataDir } from '../../lib/dataDir';
import { cronShortestGapMs } from '../../api/schedules/request';
import { openApiDocument } from '../../api/openapi/document';

/**
 * API_TOKENS_FILE: roles, plain tokens or their digests, a private file; and the other
 * settings of the API's trust boundaries.
 */

const READER = 'reader-token-0123456789';
const OPERATOR = 'operator-token-0123456789';
const ADMIN = 'admin-token-0123456789ab';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-tokens-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function tokensFile(text: string, mode = 0o600): string {
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, text, { mode });
  fs.chmodSync(file, mode);
  return file;
}

const FILE = [
  '# role  token-or-hash  name',
  `read    ${READER}  grafana`,
  `operate sha256:${sha256(OPERATOR).toString('hex')}  ci  # a digest: the token is not on this machine`,
  `admin   ${ADMIN}  alice`,
].join('\n');

test('each line is a role, a token or its SHA-256 digest, and a name; the token found is the one given', () => {
  const { tokens, problems } = parseApiTokens(FILE, 'f');
  expect(problems).toEqual([]);
  expect(tokens.map((t) => [t.role, t.name])).toEqual([['read', 'grafana'], ['operate', 'ci'], ['admin', 'alice']]);
  expect(findToken(tokens, READER)?.name).toBe('grafana');
  expect(findToken(tokens, OPERATOR)?.name).toBe('ci');
  expect(findToken(tokens, ADMIN)?.name).toBe('alice');
  expect(findToken(tokens, `sha256:${sha256(OPERATOR).toString('hex')}`)).toBeUndefined();
  expect(findToken(tokens, ADMIN.slice(0, -1))).toBeUndefined();
  expect(findToken(tokens, undefined)).toBeUndefined();
});

test('roles include the ones below them', () => {
  expect(roleAtLeast('admin', 'operate')).toBe(true);
  expect(roleAtLeast('operate', 'read')).toBe(true);
  expect(roleAtLeast('operate', 'admin')).toBe(false);
  expect(roleAtLeast('read', 'operate')).toBe(false);
});

test('bad lines are named by line, never by their token', () => {
  const { problems } = parseApiTokens(
    ['root short-secret-1 bob', 'read tooshort bob', `read ${READER}`, `read ${READER} bad/name`, `admin ${ADMIN} alice`, `read ${ADMIN} again`, `read ${OPERATOR} alice`].join('\n'),
    'F',
  );
  expect(problems).toEqual([
    'F line 1: role must be one of read, operate, admin',
    'F line 2: the token must be at least 16 characters (or sha256:<64 hex digits>)',
    'F line 3: must be "<role> <token or sha256:hex> <name> [tenant=<name>]" (3 or 4 fields, got 2)',
    'F line 4: name must be 1 to 64 letters, digits, ".", "_", "@" or "-"',
    'F line 6: the same token is listed twice',
    'F line 7: name alice is used twice',
  ]);
  expect(problems.join('\n')).not.toContain(READER);
});

test('a token belongs to a tenant: the one its line names, else its own, named after the token', () => {
  const { tokens, problems } = parseApiTokens(
    [`operate ${OPERATOR} ci tenant=team-a`, `read ${READER} grafana tenant=team-a`, `admin ${ADMIN} alice`].join('\n'),
    'f',
  );
  expect(problems).toEqual([]);
  expect(tokens.map((t) => [t.name, t.tenant])).toEqual([['ci', 'team-a'], ['grafana', 'team-a'], ['alice', 'alice']]);
  const bad = parseApiTokens([`operate ${OPERATOR} ci team-a`, `read ${READER} grafana tenant=bad/name`, `admin ${ADMIN} alice tenant=`].join('\n'), 'F');
  expect(bad.problems).toEqual([
    'F line 1: the 4th field must be tenant=<name>',
    'F line 2: tenant must be 1 to 64 letters, digits, ".", "_", "@" or "-"',
    'F line 3: tenant must be 1 to 64 letters, digits, ".", "_", "@" or "-"',
  ]);
});

test('API_TOKENS_FILE must be private to the service user, as the encryption key file must; API_TOKEN stays, as admin', () => {
  expect(() => loadConfig({ API_TOKENS_FILE: tokensFile(FILE, 0o644) })).toThrow(/API_TOKENS_FILE: .* is accessible by group or others \(mode 644\).*chmod 600/);
  expect(() => loadConfig({ API_TOKENS_FILE: path.join(dir, 'missing') })).toThrow(/API_TOKENS_FILE: cannot read .*missing \(ENOENT\)/);
  const c = loadConfig({ API_TOKENS_FILE: tokensFile(FILE), API_TOKEN: 'legacy-token-0123456789' });
  expect(c.apiTokens.map((t) => [t.role, t.name])).toEqual([['admin', 'API_TOKEN'], ['read', 'grafana'], ['operate', 'ci'], ['admin', 'alice']]);
  expect(findToken(c.apiTokens, 'legacy-token-0123456789')?.role).toBe('admin');
});

test('anonymous access: reads stay open unless a tokens file is used or ANONYMOUS_ACCESS=none', () => {
  expect(loadConfig({}).anonymousAccess).toBe('read');
  expect(loadConfig({ API_TOKEN: 'legacy-token-0123456789' }).anonymousAccess).toBe('read');
  expect(loadConfig({ API_TOKENS_FILE: tokensFile(FILE) }).anonymousAccess).toBe('none');
  expect(loadConfig({ API_TOKENS_FILE: tokensFile(FILE), ANONYMOUS_ACCESS: 'read' }).anonymousAccess).toBe('read');
  expect(() => loadConfig({ ANONYMOUS_ACCESS: 'all' })).toThrow(/ANONYMOUS_ACCESS: must be read or none/);
});

test('ALLOW_ORIGINS, ADOPT_VMID_RANGE, the stream, schedule and diagnostics settings', () => {
  const c = loadConfig({});
  expect(c.allowOrigins).toEqual([]);
  expect(c.adoptVmidRange).toEqual({ start: 100, end: 254 });
  expect(c.http.sseMaxAnonymous).toBe(50);
  expect(c.reconcilePreviewMaxAgeSec).toBe(30);
  expect(c.schedules).toEqual({ minIntervalMs: 3_600_000, maxCount: 100 });
  expect(c.publicDiagnostics).toBe(false);
  expect(c.worker.healthHost).toBe('127.0.0.1');
  // A fresh start serves every route, admin ones included: on loopback until the operator opens it.
  expect(c.apiHost).toBe('127.0.0.1');
  expect(c.diagnosticsIps).toEqual(['127.0.0.1', '::1']);
  expect(loadConfig({ API_HOST: '0.0.0.0', DIAGNOSTICS_IPS: '' })).toMatchObject({ apiHost: '0.0.0.0', diagnosticsIps: [] });
  expect(() => loadConfig({ DIAGNOSTICS_IPS: '127.0.0.0/8' })).toThrow(/DIAGNOSTICS_IPS: must list IP addresses/);

  const d = loadConfig({ ALLOW_ORIGINS: 'https://UI.example:443, http://10.0.0.5:3000', ADOPT_VMID_RANGE: '1000-1999', SSE_MAX_TOTAL: '40', SCHEDULE_MIN_INTERVAL: '1d' });
  expect(d.allowOrigins).toEqual(['https://ui.example', 'http://10.0.0.5:3000']);
  expect(d.adoptVmidRange).toEqual({ start: 1000, end: 1999 });
  expect(d.http.sseMaxAnonymous).toBe(20);
  expect(d.schedules.minIntervalMs).toBe(86_400_000);
  expect(() => loadConfig({ ALLOW_ORIGINS: 'https://ui.example/app' })).toThrow(/ALLOW_ORIGINS: must list origins/);
  expect(() => loadConfig({ ADOPT_VMID_RANGE: '300-200' })).toThrow(/ADOPT_VMID_RANGE: must be <first>-<last> with 100 <= first <= last/);
});

test('a cron expression is as frequent as its closest times of day', () => {
  expect(cronShortestGapMs('0 3 * * *')).toBe(86_400_000);
  expect(cronShortestGapMs('30 2 * * 1-5')).toBe(86_400_000);
  expect(cronShortestGapMs('*/15 * * * *')).toBe(15 * 60_000);
  expect(cronShortestGapMs('0 */6 1-15/2 * *')).toBe(6 * 3_600_000);
  expect(cronShortestGapMs('59 23,0 * * *')).toBe(3_600_000);
  expect(cronShortestGapMs('@hourly')).toBe(3_600_000);
  expect(cronShortestGapMs('@weekly')).toBe(86_400_000);
});

test('DATA_DIR is made private (0700) whatever the umask', () => {
  const old = process.umask(0o022);
  try {
    const data = path.join(dir, 'a', 'data');
    ensureDataDir(data);
    expect(fs.statSync(data).mode & 0o777).toBe(0o700);
  } finally {
    process.umask(old);
  }
  const open = path.join(dir, 'open');
  fs.mkdirSync(open, { mode: 0o755 });
  const warnings: string[] = [];
  ensureDataDir(open, { warn: (_o: unknown, msg?: string) => void warnings.push(String(msg)) } as never);
  expect(warnings).toEqual([`DATA_DIR ${open} is accessible by group or others (mode 755); run: chmod 700 ${open}`]);
});

test('the OpenAPI document names the role of every API operation, as the routes enforce it', () => {
  const doc = openApiDocument('test') as { paths: Record<string, Record<string, { 'x-role'?: string }>> };
  const role = (path: string, method: string) => doc.paths[path][method]['x-role'];
  expect(role('/api/vm/list', 'get')).toBe('read');
  expect(role('/api/workflows/{workflowId}/events', 'get')).toBe('read');
  expect(role('/api/vm/install', 'post')).toBe('operate');
  expect(role('/api/vm/{id}/start', 'post')).toBe('operate');
  expect(role('/api/vm/{id}/rebuild', 'post')).toBe('operate');
  expect(role('/api/workflows/{workflowId}/cancel', 'post')).toBe('operate');
  for (const [path, method] of [['/api/vm/{id}/adopt', 'post'], ['/api/reconcile', 'post'], ['/api/schedules', 'post'], ['/api/schedules/{id}', 'delete'], ['/api/cluster/cpu/refresh', 'post']]) {
    expect([path, role(path, method)]).toEqual([path, 'admin']);
  }
  const unnamed = Object.entries(doc.paths)
    .filter(([p]) => p.startsWith('/api/') && !/^\/api\/(health|openapi)/.test(p))
    .flatMap(([p, ops]) => Object.entries(ops).filter(([, op]) => !op['x-role']).map(([m]) => `${m} ${p}`));
  expect(unnamed).toEqual([]);
});
