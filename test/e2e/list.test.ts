import fs from 'node:fs';
import path from 'node:path';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/** `GET /api/vm/list` against the sandbox cluster, with VMs installed through the API. */

let h: Harness;
let web: number;
let db: number;

const GiB = 1024 ** 3;

beforeAll(async () => {
  h = await startHarness();
  [web, db] = await Promise.all([
    install({ name: 'web', os: 'debian', version: '12', cpu: 2, ram: 3072, disk: '20G' }),
    install({ name: 'db', os: 'ubuntu', version: '24.04', cpu: 1, ram: 1024, node: 'pve2' }),
  ]);
});

afterAll(async () => {
  await h?.stop();
});

async function install(body: Record<string, unknown>): Promise<number> {
  const res = await requestSse(`${h.api}/vm/install`, { body });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  return Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);
}

async function list(query = ''): Promise<{ status: number; body: any }> {
  const res = await fetch(`${h.api}/vm/list${query}`);
  return { status: res.status, body: await res.json() };
}

/** The sandbox's own numbers, read the way Proxmox reports them. */
async function clusterResources(): Promise<any[]> {
  const { execFileSync } = await import('node:child_process');
  const env = { ...process.env, ...h.sandbox.envFor('pve1') };
  return JSON.parse(execFileSync('pvesh', ['get', '/cluster/resources', '--output-format', 'json'], { env, encoding: 'utf8' }));
}

test('lists every VM with the seed\'s fields, from one pvesh call', async () => {
  const before = (await h.sandbox.calls()).length;
  const { status, body } = await list();
  expect(status).toBe(200);
  const calls = (await h.sandbox.calls()).slice(before);
  expect(calls.map((c) => [c.node, c.argv])).toEqual([['pve1', ['pvesh', 'get', '/cluster/resources', '--output-format', 'json']]]);

  expect(Object.keys(body).sort()).toEqual(['cluster', 'count', 'data', 'list']);
  expect(body.count).toBe(2);
  expect(body.data).toEqual(body.list);
  const resources = await clusterResources();
  const mem = (id: number) => Math.floor(resources.find((r) => r.vmid === id).mem / GiB);
  expect(body.list).toEqual([
    { vmid: web, name: `web-${web}`, os: 'debian', running: true, node: 'pve1', cpu: 2, disk: 20, memory: 3, memory_used: mem(web) },
    { vmid: db, name: `db-${db}`, os: 'ubuntu', running: true, node: 'pve2', cpu: 1, disk: 16, memory: 1, memory_used: mem(db) },
  ].sort((a, b) => a.vmid - b.vmid));
});

test('cluster entries: capacity in GiB, allocation in percent of it', async () => {
  const { body } = await list();
  const resources = await clusterResources();
  const expected = resources
    .filter((r) => r.type === 'node')
    .sort((a, b) => a.node.localeCompare(b.node))
    .map((n) => {
      const vms = resources.filter((r) => r.type === 'qemu' && r.node === n.node);
      const pct = (x: number, of: number) => Math.round((x / of) * 10000) / 100;
      const sum = (k: string) => vms.reduce((s, v) => s + v[k], 0);
      return {
        node: n.node,
        max_cpu: n.maxcpu,
        max_memory: Math.round((n.maxmem / GiB) * 100) / 100,
        cpu: pct(sum('maxcpu'), n.maxcpu),
        memory: pct(sum('maxmem'), n.maxmem),
        memory_used: pct(sum('mem'), n.maxmem),
        disk: Math.round((n.maxdisk / GiB) * 100) / 100,
        running: true,
      };
    });
  expect(body.cluster).toEqual(expected);
  expect(body.cluster.map((n: { node: string }) => n.node)).toEqual(['pve1', 'pve2']);
  // pve1: 2 of its vCPUs and 3 GiB of its memory are given to web
  const pve1 = body.cluster[0];
  expect(pve1.cpu).toBeGreaterThan(0);
  expect(pve1.memory).toBe(Math.round(((3 * 1024 ** 3) / (pve1.max_memory * GiB)) * 10000) / 100);
});

test('?disable=0 lists running VMs only, ?disable=1 stopped ones only', async () => {
  expect(await fetch(`${h.api}/vm/${db}/stop`, { method: 'POST', headers: { 'Content-Type': 'application/json' } }).then((r) => r.text())).toBe('ok');
  const running = (await list('?disable=0')).body;
  expect(running.list.map((v: { vmid: number }) => v.vmid)).toEqual([web]);
  expect(running.count).toBe(1);
  const stopped = (await list('?disable=1')).body;
  expect(stopped.list).toEqual([expect.objectContaining({ vmid: db, running: false, memory_used: 0 })]);
  // the stopped VM still counts as allocated on pve2 in the unfiltered list
  const all = (await list()).body;
  expect(all.count).toBe(2);
  expect(all.cluster.find((n: { node: string }) => n.node === 'pve2').memory).toBeGreaterThan(0);
  expect(all.cluster.find((n: { node: string }) => n.node === 'pve2').memory_used).toBe(0);
});

test('disabled VMs are left out, whatever the filter; a bad filter is 400', async () => {
  fs.writeFileSync(path.join(h.config.dataDir, 'disabled'), `${web}:web-${web}\n`);
  try {
    for (const q of ['', '?disable=0', '?disable=1']) {
      const { body } = await list(q);
      expect(body.list.map((v: { vmid: number }) => v.vmid)).not.toContain(web);
    }
    expect((await list()).body.count).toBe(1);
  } finally {
    fs.rmSync(path.join(h.config.dataDir, 'disabled'));
  }
  const bad = await list('?disable=2');
  expect(bad).toEqual({ status: 400, body: { success: false, message: 'please check your input: disable: must be 0 (running VMs) or 1 (stopped VMs)' } });
});
