import { cliCluster } from '../../lib/proxmox';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../api/app';
import { startHarness, Harness } from '../support/harness';
import { parseApiTokens, sha256 } from '../../lib/apiTokens';
import { waitFor } from '../../sandbox/testkit';

/**
 * The access guard behind a reverse proxy: the API trusts X-Forwarded-For from
 * TRUSTED_PROXIES (here the loopback address the test connects from), ALLOW_IPS names a
 * client address that only the proxy can vouch for, and API_TOKEN is set. Plus CORS.
 */

const TOKEN = 'test-token-0123456789abcdef';
const CLIENT = '203.0.113.7';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ ALLOW_IPS: CLIENT, TRUSTED_PROXIES: '127.0.0.1', API_TOKEN: TOKEN });
});

afterAll(async () => {
  await h?.stop();
});

async function call(method: string, p: string, headers: Record<string, string> = {}) {
  const json: Record<string, string> = method === 'GET' ? {} : { 'Content-Type': 'application/json' };
  const res = await fetch(`${h.api}${p}`, { method, headers: { ...json, ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

const viaProxy = (extra: Record<string, string> = {}) => ({ 'X-Forwarded-For': CLIENT, ...extra });
const bearer = { Authorization: `Bearer ${TOKEN}` };

/** An API of its own, with settings the harness's service does not have, on a free loopback port. */
async function serveApp(options: Partial<Parameters<typeof createApp>[0]>): Promise<{ base: string; close(): Promise<void> }> {
  const app = createApp({ config: h.config, client: h.service.client, knownNodes: ['pve1', 'pve2'], proxmox: cliCluster({}, h.config.mainNode), ...options });
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('X-Forwarded-For from a trusted proxy', () => {
  test('names the client: an allowed one with the token passes the guard', async () => {
    // VM 9999 does not exist: a 404 means the guard let the request through
    const res = await call('POST', '/vm/9999/stop', viaProxy(bearer));
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ success: false, message: 'VM 9999 does not exist' });
  });

  test('without the header the caller is the proxy itself, which is not allowed', async () => {
    const res = await call('POST', '/vm/9999/stop', bearer);
    expect(res.status).toBe(403);
    expect(res.json()).toEqual({ success: false, message: 'client 127.0.0.1 is not in ALLOW_IPS' });
  });

  test('a client cannot prepend an allowed address: the right-most untrusted entry counts', async () => {
    const res = await call('POST', '/vm/9999/stop', { 'X-Forwarded-For': `${CLIENT}, 198.51.100.2`, ...bearer });
    expect(res.status).toBe(403);
    expect(res.json()).toEqual({ success: false, message: 'client 198.51.100.2 is not in ALLOW_IPS' });
  });
});

describe('API_TOKEN', () => {
  test('a mutating call without the token, or with a wrong one, is 401', async () => {
    for (const auth of [{}, { Authorization: 'Bearer wrong-token-0123456789' }, { Authorization: TOKEN }] as Array<Record<string, string>>) {
      const res = await call('POST', '/vm/9999/stop', viaProxy(auth));
      expect(res.status).toBe(401);
      expect(res.json()).toEqual({ success: false, message: 'missing or wrong bearer token' });
    }
    const install = await call('POST', '/vm/install', viaProxy());
    expect(install.status).toBe(401);
    const refresh = await call('POST', '/cluster/cpu/refresh', viaProxy());
    expect(refresh.status).toBe(401);
    const adopt = await call('POST', '/vm/9999/adopt', viaProxy());
    expect(adopt.status).toBe(401);
  });

  test('the scheme is case-insensitive (RFC 9110): bearer, BEARER pass; other schemes and a wrong token do not', async () => {
    for (const scheme of ['bearer', 'BEARER', 'bEaReR', 'Bearer']) {
      const res = await call('POST', '/vm/9999/stop', viaProxy({ Authorization: `${scheme} ${TOKEN}` }));
      expect([scheme, res.status]).toEqual([scheme, 404]); // past the guard: VM 9999 does not exist
    }
    for (const auth of [`Basic ${TOKEN}`, `bearer  ${TOKEN}x`, `bearer${TOKEN}`, `bearer ${TOKEN} extra`]) {
      expect([auth, (await call('POST', '/vm/9999/stop', viaProxy({ Authorization: auth }))).status]).toEqual([auth, 401]);
    }
  });

  test('the token opens every mutating endpoint', async () => {
    const refresh = await call('POST', '/cluster/cpu/refresh', viaProxy(bearer));
    expect(refresh.status).toBe(200);
    expect(refresh.json()).toMatchObject({ success: true, cpu: 'x86-64-v2-AES' });
  });

  test('reads need neither the token nor an allowed address', async () => {
    expect((await call('GET', '/health')).text).toBe('ok');
    expect((await call('GET', '/vm/list')).status).toBe(200);
    expect((await call('GET', '/vm/9999/status')).status).toBe(404);
  });
});

describe('CORS', () => {
  async function preflight(base: string, origin: string, method = 'POST') {
    const res = await fetch(`${base}/vm/9999/stop`, {
      method: 'OPTIONS',
      headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': 'content-type,authorization' },
    });
    return { status: res.status, headers: res.headers };
  }

  test('the server\'s own subnets: a loopback origin may read, not change; others are refused without ACAO', async () => {
    const ok = await preflight(h.api, 'http://127.0.0.1:5173', 'GET');
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:5173');
    expect(ok.headers.get('access-control-allow-methods')).toBe('GET, OPTIONS');
    expect(ok.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(ok.headers.get('vary')).toMatch(/Origin/);
    // A page on another loopback address (or machine of the subnet) is not the API's own.
    expect((await preflight(h.api, 'http://127.0.0.2:5173', 'POST')).status).toBe(403);
    for (const origin of ['http://192.0.2.10', 'https://evil.example', 'null']) {
      const no = await preflight(h.api, origin, 'GET');
      expect(no.status).toBe(403);
      expect(no.headers.get('access-control-allow-origin')).toBeNull();
    }
  });

  describe('with the subnet list injected', () => {
    let served: Awaited<ReturnType<typeof serveApp>>;
    let base: string;

    beforeAll(async () => {
      served = await serveApp({ corsSubnets: [{ address: '10.20.30.1', bits: 24 }] });
      base = served.base;
    });

    afterAll(() => served.close());

    test('a private origin in that subnet may read; one outside it, loopback included, is refused', async () => {
      const ok = await preflight(base, 'http://10.20.30.40:8080', 'GET');
      expect(ok.status).toBe(204);
      expect(ok.headers.get('access-control-allow-origin')).toBe('http://10.20.30.40:8080');
      for (const origin of ['http://10.20.31.40', 'http://127.0.0.1:5173', 'http://8.8.8.8']) {
        const no = await preflight(base, origin, 'GET');
        expect({ origin, status: no.status, acao: no.headers.get('access-control-allow-origin') }).toEqual({ origin, status: 403, acao: null });
      }
    });

    test('a simple request from an admitted origin carries ACAO; from a refused one it does not', async () => {
      const ok = await fetch(`${base}/health`, { headers: { Origin: 'http://10.20.30.40' } });
      expect(ok.headers.get('access-control-allow-origin')).toBe('http://10.20.30.40');
      expect(ok.headers.get('access-control-expose-headers')).toMatch(/X-Workflow-Id/);
      const no = await fetch(`${base}/health`, { headers: { Origin: 'http://10.20.31.40' } });
      expect(no.status).toBe(200);
      expect(no.headers.get('access-control-allow-origin')).toBeNull();
    });
  });
});

describe('roles (API_TOKENS_FILE)', () => {
  const READER = 'reader-token-0123456789';
  const OPERATOR = 'operator-token-0123456789';
  const OTHER_OPERATOR = 'operator-two-token-0123456789';
  const ADMIN = 'admin-token-0123456789abc';
  let served: Awaited<ReturnType<typeof serveApp>>;
  let base: string;

  beforeAll(async () => {
    const { tokens, problems } = parseApiTokens(
      `read ${READER} grafana\noperate ${OPERATOR} ci tenant=ci\noperate ${OTHER_OPERATOR} ci2 tenant=ci\nadmin sha256:${sha256(ADMIN).toString('hex')} alice\n`,
      'test',
    );
    expect(problems).toEqual([]);
    // API_TOKEN of the harness stays, as admin; the file's default: no anonymous reads.
    served = await serveApp({ config: { ...h.config, apiTokens: [...h.config.apiTokens, ...tokens], anonymousAccess: 'none' as const } });
    base = served.base;
  });

  afterAll(() => served.close());

  async function as(token: string | undefined, method: string, p: string, extra: Record<string, string> = {}) {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { ...viaProxy(token ? { Authorization: `Bearer ${token}` } : {}), ...(method === 'GET' ? {} : { 'Content-Type': 'application/json' }), ...extra },
    });
    return { status: res.status, json: (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined };
  }

  test('each endpoint needs its role: 403 names it; a role includes the ones below it', async () => {
    const needs = (role: string, name: string, has: string) => ({
      status: 403,
      json: { success: false, message: `this needs the ${role} role; token ${name} has the ${has} role`, role },
    });
    expect(await as(READER, 'POST', '/vm/9999/stop')).toEqual(needs('operate', 'grafana', 'read'));
    expect(await as(READER, 'POST', '/vm/install')).toEqual(needs('operate', 'grafana', 'read'));
    for (const p of ['/vm/199/adopt', '/reconcile', '/schedules', '/cluster/cpu/refresh']) {
      expect([p, await as(OPERATOR, 'POST', p)]).toEqual([p, needs('admin', 'ci', 'operate')]);
    }
    // Past the guard (this app reaches no node: the answers need none).
    for (const token of [OPERATOR, ADMIN, TOKEN]) expect((await as(token, 'POST', '/workflows/no-such-workflow/cancel')).status).toBe(404);
    for (const token of [ADMIN, TOKEN]) {
      expect(await as(token, 'POST', '/vm/9999/adopt')).toEqual({
        status: 400,
        json: { success: false, message: 'VM 9999 is outside ADOPT_VMID_RANGE (100-254) and cannot be adopted' },
      });
    }
    for (const token of [READER, OPERATOR, ADMIN]) expect((await as(token, 'GET', '/schedules')).status).toBe(200);
  });

  test('without a token: changes are 401, and reads too with ANONYMOUS_ACCESS=none; a wrong token is 401 everywhere', async () => {
    expect(await as(undefined, 'POST', '/vm/9999/stop')).toEqual({ status: 401, json: { success: false, message: 'missing or wrong bearer token' } });
    expect(await as(undefined, 'GET', '/schedules')).toEqual({
      status: 401,
      json: { success: false, message: 'this needs a bearer token with the read role (ANONYMOUS_ACCESS=none)', role: 'read' },
    });
    expect((await as(undefined, 'GET', '/health')).status).toBe(200);
    expect((await as(undefined, 'GET', '/openapi.json')).status).toBe(200);
    expect((await as('wrong-token-0123456789', 'GET', '/schedules')).status).toBe(401);
  });

  test('whoami names the role the guards grant: the token\'s from an allowed address, read from any other', async () => {
    const who = async (token: string, headers: Record<string, string>) =>
      (await fetch(`${base}/whoami`, { headers: { Authorization: `Bearer ${token}`, ...headers } })).json();
    expect(await who(OPERATOR, viaProxy())).toEqual({ success: true, name: 'ci', role: 'operate', tokens: true });
    expect(await who(ADMIN, viaProxy())).toEqual({ success: true, name: 'alice', role: 'admin', tokens: true });
    expect(await who(READER, viaProxy())).toEqual({ success: true, name: 'grafana', role: 'read', tokens: true });
    // The proxy's own address is not in ALLOW_IPS: whatever the token, every change would be 403.
    expect(await who(ADMIN, {})).toEqual({ success: true, name: 'alice', role: 'read', tokens: true });
    expect((await as(ADMIN, 'POST', '/vm/9999/adopt', { 'X-Forwarded-For': '198.51.100.9' })).status).toBe(403);
    expect(await who(ADMIN, { 'X-Forwarded-For': '198.51.100.9' })).toEqual({ success: true, name: 'alice', role: 'read', tokens: true });
  });

  test('the operate role cancels its own work only; the admin anyone\'s', async () => {
    // The install's first qm start hangs: it is still running while the cancels arrive.
    await h.sandbox.injectFault({ command: 'qm start', hangMs: 8000, times: 1 });
    const started = await fetch(`${base}/vm/install`, {
      method: 'POST',
      headers: { ...viaProxy({ Authorization: `Bearer ${OPERATOR}` }), 'Content-Type': 'application/json', Prefer: 'respond-async' },
      body: JSON.stringify({ os: 'debian', version: '12', name: 'roles' }),
    });
    expect(started.status).toBe(202);
    const { workflowId } = (await started.json()) as { workflowId: string };
    // A token of the same tenant (another tenant's is answered 404, security.tenants).
    expect(await as(OTHER_OPERATOR, 'POST', `/workflows/${workflowId}/cancel`)).toEqual({
      status: 403,
      json: { success: false, message: `this needs the admin role: workflow ${workflowId} was not started with token ci2`, role: 'admin' },
    });
    expect((await as(OPERATOR, 'POST', `/workflows/${workflowId}/cancel`)).status).toBe(202);
    await h.service.client.workflow.getHandle(workflowId).result().catch(() => undefined);
    expect((await h.service.client.workflow.getHandle(workflowId).describe()).status.name).toBe('CANCELLED');
  });
});

describe('diagnostics: /metrics and readiness details', () => {
  const STRANGER = '198.51.100.2';
  test('served to DIAGNOSTICS_IPS, ALLOW_IPS and token holders; a stranger gets 403 and the bare verdict', async () => {
    const metrics = (headers: Record<string, string>) => fetch(`${h.service.url}/metrics`, { headers });
    expect((await metrics({})).status).toBe(200);
    expect((await metrics({ 'X-Forwarded-For': CLIENT })).status).toBe(200);
    expect((await metrics({ 'X-Forwarded-For': STRANGER, ...bearer })).status).toBe(200);
    const refused = await metrics({ 'X-Forwarded-For': STRANGER });
    expect(refused.status).toBe(403);
    expect(await refused.text()).not.toMatch(/qemurun_/);

    const ready = async (headers: Record<string, string>) => (await call('GET', '/health/ready', headers)).json();
    expect(Object.keys(await ready({}))).toEqual(['ready', 'checks']);
    expect(await ready({ 'X-Forwarded-For': STRANGER })).toEqual({ ready: true });
  });
});

describe('schedules: SCHEDULE_MIN_INTERVAL and SCHEDULE_MAX_COUNT', () => {
  let served: Awaited<ReturnType<typeof serveApp>>;
  let base: string;
  const existing = `guard-test-schedule-${process.pid}`;

  beforeAll(async () => {
    served = await serveApp({ config: { ...h.config, schedules: { minIntervalMs: 3_600_000, maxCount: 1 } } });
    base = served.base;
  });

  afterAll(async () => {
    await h.service.client.schedule.getHandle(existing).delete().catch(() => undefined);
    await served.close();
  });

  const create = async (body: unknown) => {
    const res = await fetch(`${base}/schedules`, { method: 'POST', headers: viaProxy({ ...bearer, 'Content-Type': 'application/json' }), body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as { message?: string } };
  };

  test('a rebuild more often than the minimum is 400 naming the field', async () => {
    expect(await create({ vmid: 140, interval: '30m' })).toEqual({
      status: 400,
      json: { success: false, message: 'please check your input: interval: runs every 30m at the shortest; rebuilds may run at most every 1h (SCHEDULE_MIN_INTERVAL)' },
    });
    expect((await create({ vmid: 140, cron: '*/10 * * * *' })).json.message).toBe(
      'please check your input: cron: runs every 10m at the shortest; rebuilds may run at most every 1h (SCHEDULE_MIN_INTERVAL)',
    );
  });

  test('past the count limit a new schedule is 409, before anything is read or made', async () => {
    await h.service.client.schedule.create({
      scheduleId: existing,
      spec: { intervals: [{ every: '1d' }] },
      action: { type: 'startWorkflow', workflowType: 'scheduledRebuild', args: [], taskQueue: `${h.config.temporal.taskQueue}-nobody` },
      state: { paused: true },
    });
    // Schedules are listed from visibility: wait until the new one is there.
    const listed = async () => {
      for await (const s of h.service.client.schedule.list()) if (s.scheduleId === existing) return true;
      return false;
    };
    await waitFor('the schedule in the list', listed, 10_000);
    const res = await create({ vmid: 140, interval: '1d' });
    expect(res.status).toBe(409);
    expect(res.json.message).toMatch(/^there are already \d+ rebuild schedules, SCHEDULE_MAX_COUNT \(1\); delete one first$/);
  });
});

describe('SCHEDULE_MAX_COUNT under concurrency', () => {
  const made: string[] = [];
  afterAll(async () => {
    await Promise.all(made.map((id) => h.service.client.schedule.getHandle(id).delete().catch(() => undefined)));
  });

  test('20 creates at once with room for 3: 3 schedules are made, the others are 409', async () => {
    // The schedule the test before deleted leaves the list (visibility) a moment later: counted
    // here and gone by the time the API counts, it would leave room for a fourth.
    const rebuildSchedules = async () => {
      const ids: string[] = [];
      for await (const s of h.service.client.schedule.list()) if (s.action?.type === 'startWorkflow' && s.action.workflowType === 'scheduledRebuild') ids.push(s.scheduleId);
      return ids;
    };
    const before = (await waitFor('the deleted schedule to leave the list', async () => {
      const ids = await rebuildSchedules();
      return ids.some((id) => id.startsWith('guard-test-schedule-')) ? undefined : ids;
    }, 30_000)).length;
    // A cluster without these VMIDs: each schedule re-creates its VM from its spec.
    const proxmox = Object.assign(Object.create(cliCluster({}, h.config.mainNode)) as ReturnType<typeof cliCluster>, { locateGuest: async () => undefined });
    const served = await serveApp({ config: { ...h.config, schedules: { minIntervalMs: 3_600_000, maxCount: before + 3 } }, proxmox });
    try {
      const ids = Array.from({ length: 20 }, (_, i) => `guard-race-${process.pid}-${i}`);
      const answers = await Promise.all(
        ids.map(async (id, i) => {
          const res = await fetch(`${served.base}/schedules`, {
            method: 'POST',
            headers: viaProxy({ ...bearer, 'Content-Type': 'application/json' }),
            body: JSON.stringify({ id, spec: { os: 'debian', version: '12', id: 150 + i }, interval: '1d', paused: true }),
          });
          if (res.status === 201) made.push(id);
          else if (res.status !== 409) throw new Error(`${res.status}: ${await res.text()}`);
          return res.status;
        }),
      );
      expect(answers.filter((s) => s === 201)).toHaveLength(3);
      expect(answers.filter((s) => s !== 201)).toEqual(Array(17).fill(409));
    } finally {
      await served.close();
    }
  });
});
