import { cliCluster } from '../../lib/proxmox';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../api/app';
import { startHarness, Harness } from '../support/harness';

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
  async function preflight(base: string, origin: string) {
    const res = await fetch(`${base}/vm/9999/stop`, {
      method: 'OPTIONS',
      headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,authorization' },
    });
    return { status: res.status, headers: res.headers };
  }

  test('the server\'s own subnets: a loopback origin is admitted, others are refused without ACAO', async () => {
    const ok = await preflight(h.api, 'http://127.0.0.1:5173');
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:5173');
    expect(ok.headers.get('access-control-allow-methods')).toContain('POST');
    expect(ok.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(ok.headers.get('vary')).toMatch(/Origin/);
    for (const origin of ['http://192.0.2.10', 'https://evil.example', 'null']) {
      const no = await preflight(h.api, origin);
      expect(no.status).toBe(403);
      expect(no.headers.get('access-control-allow-origin')).toBeNull();
    }
  });

  describe('with the subnet list injected', () => {
    let server: http.Server;
    let base: string;

    beforeAll(async () => {
      const app = createApp({
        config: h.config,
        client: h.service.client,
        knownNodes: ['pve1', 'pve2'],
        proxmox: cliCluster({}, h.config.mainNode),
        corsSubnets: [{ address: '10.20.30.1', bits: 24 }],
      });
      server = http.createServer(app);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    });

    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    test('a private origin in that subnet is admitted; one outside it, loopback included, is refused', async () => {
      const ok = await preflight(base, 'http://10.20.30.40:8080');
      expect(ok.status).toBe(204);
      expect(ok.headers.get('access-control-allow-origin')).toBe('http://10.20.30.40:8080');
      for (const origin of ['http://10.20.31.40', 'http://127.0.0.1:5173', 'http://8.8.8.8']) {
        const no = await preflight(base, origin);
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
