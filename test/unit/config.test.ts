import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, envSchema, loadConfig } from '../../lib/config';

test('a bad configuration names every bad or missing setting at once', () => {
  let err: unknown;
  try {
    loadConfig({ MAIN_NODE: 'pve1', PORT: 'eighty', GATEWAY: '10.0.0', NODE_pve2: '10.0.0.12:ssh', VM_MAX_CPU: '-1' });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  const text = (err as ConfigError).message;
  for (const name of ['PORT', 'GATEWAY', 'NODE_pve2', 'VM_MAX_CPU', 'ASSIGN_STORAGE', 'NODE_pve1']) expect(text).toContain(name);
});

test('ALLOW_IPS and TRUSTED_PROXIES are IP addresses: an entry that is not one is named, not silently matched by nobody', () => {
  const parsed = envSchema.safeParse({ ALLOW_IPS: '10.0.0.5, 10.0.0.5.1, ::1', TRUSTED_PROXIES: 'proxy.lan' });
  expect(parsed.success).toBe(false);
  const issues = parsed.error!.issues.map((i) => [i.path.join('.'), i.message]);
  expect(issues).toEqual([
    ['ALLOW_IPS', expect.stringMatching(/IP addresses.*not one: 10\.0\.0\.5\.1$/)],
    ['TRUSTED_PROXIES', expect.stringMatching(/IP addresses.*not one: proxy\.lan$/)],
  ]);
  expect(envSchema.parse({ ALLOW_IPS: '0.0.0.0', TRUSTED_PROXIES: '10.0.0.1, fd00::1' })).toMatchObject({ ALLOW_IPS: ['0.0.0.0'], TRUSTED_PROXIES: ['10.0.0.1', 'fd00::1'] });
});

test('a real cluster: nodes with optional SSH ports, the seed names, clamped VMID range', () => {
  const c = loadConfig({
    MAIN_NODE: 'pve1',
    NODE_pve1: '10.0.0.11',
    NODE_pve2: '10.0.0.12:2222',
    NODE_ENV: 'production', // Node.js's own variable, not a cluster node
    NODE_OPTIONS: '--max-old-space-size=512',
    GATEWAY: '10.0.0.1',
    ASSIGN_STORAGE: 'local-lvm',
    ALLOW_IPS: '10.0.0.5, 10.0.0.6',
    ASSIGN_IP_START: '50',
    ASSIGN_IP_END: '300',
  });
  expect(c.sandbox).toBe(false);
  expect(c.nodes).toEqual({ pve1: { host: '10.0.0.11', port: 22 }, pve2: { host: '10.0.0.12', port: 2222 } });
  expect(c.allowIps).toEqual(['10.0.0.5', '10.0.0.6']);
  expect(c.vmidRange).toEqual({ start: 100, end: 254 });
});

test('nothing configured: sandbox mode on loopback, local callers allowed', () => {
  const c = loadConfig({});
  expect(c.sandbox).toBe(true);
  expect(c.mainNode).toBe('pve1');
  expect(c.gateway).toBe('127.0.0.1');
  expect(c.allowIps).toEqual(['127.0.0.1', '::1']);
  expect(c.port).toBe(8080);
  expect(c.temporal).toMatchObject({ address: undefined, namespace: 'default', taskQueue: 'qemurun', uiPort: 8233 });
});

test('the image directory on a main node reached over SSH: absolute, defaulted, no trailing slash', () => {
  expect(loadConfig({}).nodeImageDir).toBe('/var/tmp/qemurun-images');
  expect(loadConfig({ MAIN_NODE_IMAGE_DIR: '/srv/images/' }).nodeImageDir).toBe('/srv/images');
  expect(() => loadConfig({ MAIN_NODE_IMAGE_DIR: 'images' })).toThrow(/MAIN_NODE_IMAGE_DIR: must be an absolute path/);
});

test('every setting the service reads is described in the settings table of docs/configuration.md', () => {
  // The first cell of each row of the settings table names one or more variables.
  const table = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'configuration.md'), 'utf8');
  const firstCells = [...table.matchAll(/^\| ([^|]+) \|/gm)].map((m) => m[1]);
  const documented = new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1])));
  const undocumented = Object.keys(envSchema.shape).filter((name) => !documented.has(name));
  expect(undocumented).toEqual([]);
});

describe('API mode settings', () => {
  const base = { MAIN_NODE: 'pve1', GATEWAY: '10.0.0.1', ASSIGN_STORAGE: 'local-lvm', PROXMOX_API_URL: 'https://10.0.0.11:8006, https://10.0.0.12:8006/' };
  const secret = 'b7d3f0aa-1c55-4e2b-9a1d-3f6c8e2d4b10';

  test('URLs in order, the token from the environment or a file; no NODE_<main> needed', () => {
    const c = loadConfig({ ...base, PROXMOX_API_TOKEN: `qemurun@pve!svc=${secret}`, PROXMOX_API_FINGERPRINT: 'AB:'.repeat(31) + 'AB' });
    expect(c.proxmoxApi).toMatchObject({ urls: ['https://10.0.0.11:8006', 'https://10.0.0.12:8006'], token: `qemurun@pve!svc=${secret}`, insecure: false, imageStorage: 'local' });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-config-'));
    try {
      fs.writeFileSync(path.join(dir, 'token'), `qemurun@pve!svc=${secret}\n`);
      expect(loadConfig({ ...base, PROXMOX_API_TOKEN_FILE: path.join(dir, 'token') }).proxmoxApi?.token).toBe(`qemurun@pve!svc=${secret}`);
      fs.writeFileSync(path.join(dir, 'bad'), `${secret}\n`);
      let err: unknown;
      try {
        loadConfig({ ...base, PROXMOX_API_TOKEN_FILE: path.join(dir, 'bad') });
      } catch (e) {
        err = e;
      }
      expect((err as Error).message).toMatch(/PROXMOX_API_TOKEN_FILE: must hold user@realm!tokenid=secret/);
      expect((err as Error).message).not.toContain(secret);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(loadConfig({}).proxmoxApi).toBeUndefined();
  });

  test('PROXMOX_API_FINGERPRINT: one pin for all URLs, or one per URL in their order', () => {
    const a = 'AB:'.repeat(31) + 'AB';
    const b = 'cd'.repeat(32);
    const token = `qemurun@pve!svc=${secret}`;
    expect(loadConfig({ ...base, PROXMOX_API_TOKEN: token, PROXMOX_API_FINGERPRINT: a }).proxmoxApi?.fingerprint).toBe(a);
    expect(loadConfig({ ...base, PROXMOX_API_TOKEN: token, PROXMOX_API_FINGERPRINT: `${a}, ${b}` }).proxmoxApi?.fingerprint).toEqual([a, b]);
    expect(() => loadConfig({ ...base, PROXMOX_API_TOKEN: token, PROXMOX_API_FINGERPRINT: `${a},${b},${a}` })).toThrow(
      /PROXMOX_API_FINGERPRINT: 3 fingerprints for 2 URLs in PROXMOX_API_URL; give one for all, or one per URL in the same order/,
    );
    expect(() => loadConfig({ ...base, PROXMOX_API_TOKEN: token, PROXMOX_API_FINGERPRINT: `${a},nope` })).toThrow(/PROXMOX_API_FINGERPRINT: must be a SHA-256 fingerprint/);
  });

  test('bad combinations are named', () => {
    expect(() => loadConfig({ ...base })).toThrow(/PROXMOX_API_TOKEN: required with PROXMOX_API_URL/);
    expect(() => loadConfig({ ...base, PROXMOX_API_URL: 'http://10.0.0.11:8006', PROXMOX_API_TOKEN: `a@pve!b=${secret}` })).toThrow(/PROXMOX_API_URL: must be https/);
    expect(() => loadConfig({ ...base, PROXMOX_API_TOKEN: `a@pve!b=${secret}`, PROXMOX_API_INSECURE: '1', PROXMOX_API_FINGERPRINT: 'ab'.repeat(32) })).toThrow(
      /set one of PROXMOX_API_CA_FILE, PROXMOX_API_FINGERPRINT, PROXMOX_API_INSECURE/,
    );
    expect(() => loadConfig({ PROXMOX_API_TOKEN: `a@pve!b=${secret}` })).toThrow(/PROXMOX_API_URL: required with PROXMOX_API_TOKEN/);
    let err: unknown;
    try {
      loadConfig({ ...base, PROXMOX_API_TOKEN: secret });
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toMatch(/PROXMOX_API_TOKEN: must be user@realm!tokenid=secret/);
    expect((err as Error).message).not.toContain(secret);
  });
});

test('CLONE_CONCURRENCY: 2 clones per storage by default; a bad value stops the start, naming it', () => {
  expect(loadConfig({}).cloneConcurrency).toBe(2);
  expect(loadConfig({ CLONE_CONCURRENCY: '4' }).cloneConcurrency).toBe(4);
  expect(() => loadConfig({ CLONE_CONCURRENCY: '0' })).toThrow(/CLONE_CONCURRENCY: must be an integer from 1 to 64/);
  expect(() => loadConfig({ CLONE_CONCURRENCY: 'two' })).toThrow(/CLONE_CONCURRENCY: must be an integer/);
});

test('QEMURUN_ROLE: all by default; api and worker need the Temporal server and cluster they share', () => {
  expect(loadConfig({}).role).toBe('all');
  expect(() => loadConfig({ QEMURUN_ROLE: 'scheduler' })).toThrow(/QEMURUN_ROLE: must be all, api or worker/);
  let err: unknown;
  try {
    loadConfig({ QEMURUN_ROLE: 'worker' });
  } catch (e) {
    err = e;
  }
  expect((err as ConfigError).problems).toEqual([
    expect.stringMatching(/^TEMPORAL_ADDRESS: required with QEMURUN_ROLE=worker/),
    expect.stringMatching(/^MAIN_NODE: required with QEMURUN_ROLE=worker \(npm run sandbox prints/),
  ]);
  const api = loadConfig({
    QEMURUN_ROLE: 'api',
    TEMPORAL_ADDRESS: 'temporal:7233',
    MAIN_NODE: 'pve1',
    NODE_pve1: '10.0.0.11',
    GATEWAY: '10.0.0.1',
    ASSIGN_STORAGE: 'local-lvm',
    WORKER_SHUTDOWN_GRACE: '5',
  });
  expect(api).toMatchObject({ role: 'api', worker: { healthPort: 8081, shutdownGraceSec: 5 } });
});
