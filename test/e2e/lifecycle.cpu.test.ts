import fs from 'node:fs';
import path from 'node:path';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { injectFaultOn, operations, operationsMark, operationsOn } from '../support/proxmoxCalls';

/**
 * The cluster CPU baseline: the sandbox's pve2 has an x86-64-v2-AES CPU (pve1 v3), so the
 * baseline is x86-64-v2-AES and Rocky Linux 10 (built for x86-64-v3) is refused before any
 * VM exists. The image's preparation runs beside the baseline check and is cancelled by
 * its refusal: the image is never imported. The cache is detected again when the online nodes change, and on request.
 */

let h: Harness;
let cacheFile: string;

beforeAll(async () => {
  h = await startHarness();
  cacheFile = path.join(h.config.dataDir, 'cpu-type');
});

afterAll(async () => {
  await h?.stop();
});

async function refresh(headers: Record<string, string> = {}) {
  const res = await fetch(`${h.api}/cluster/cpu/refresh`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers } });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function rocky10() {
  const before = await operationsMark(h);
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'rockylinux', version: '10', name: 'r10' } });
  const creates = (await operationsOn(h, 'create', undefined, before)).length;
  return { res, creates };
}

test('Rocky 10 on an x86-64-v2-AES cluster fails early with a clear error event and no VM', async () => {
  const { res, creates } = await rocky10();
  expect(res.status).toBe(200);
  expect(res.closed).toBe(true);
  const last = res.events.at(-1)!;
  expect(last).toMatchObject({
    step: 'preparation > CPU baseline',
    status: 'error',
    message: '[-] rockylinux 10 needs a x86-64-v3 CPU, but the cluster baseline is x86-64-v2-AES',
  });
  expect(res.events.filter((e) => e.status === 'error')).toHaveLength(1);
  expect(creates).toBe(0);
  // The image branch, started beside the check, got no further than the preparation.
  expect(res.events.some((e) => e.step.startsWith('VM creation'))).toBe(false);
  // cached with the nodes it was detected on
  expect(fs.readFileSync(cacheFile, 'utf8')).toBe('x86-64-v2-AES\nnodes=pve1,pve2\n');
  // The stream ends with the run's last event, a moment before Temporal records its end.
  const handle = h.service.client.workflow.getHandle(res.headers['x-workflow-id'] as string);
  await expect(handle.result()).rejects.toThrow();
  expect((await handle.describe()).status.name).toBe('FAILED');
});

test('a cache detected on other online nodes is detected again', async () => {
  // as if detected while pve2 (the older CPU) was offline: v3 would let Rocky 10 through
  fs.writeFileSync(cacheFile, 'x86-64-v3\nnodes=pve1\n');
  const before = await operationsMark(h);
  const { res, creates } = await rocky10();
  expect((await operations(h, before)).filter((o) => o.op === 'GET /nodes/pve2/status')).toHaveLength(1);
  expect(res.events.at(-1)).toMatchObject({ status: 'error', message: expect.stringContaining('the cluster baseline is x86-64-v2-AES') });
  expect(creates).toBe(0);
  expect(fs.readFileSync(cacheFile, 'utf8')).toBe('x86-64-v2-AES\nnodes=pve1,pve2\n');
});

test('POST /api/cluster/cpu/refresh detects now, replacing a type pinned by hand', async () => {
  // the seed's file format: a type without a node list is kept as the operator wrote it...
  fs.writeFileSync(cacheFile, 'x86-64-v2\n');
  const before = await operationsMark(h);
  const { res } = await rocky10();
  expect(res.events.at(-1)!.message).toBe('[-] rockylinux 10 needs a x86-64-v3 CPU, but the cluster baseline is x86-64-v2');
  // no detection: neither the node list nor a node's CPU was read
  expect((await operations(h, before)).filter((o) => /^GET \/nodes(?:\/[^/]+\/status)?$/.test(o.op))).toEqual([]);
  // ...until refreshed
  expect(await refresh()).toEqual({ status: 200, json: { success: true, cpu: 'x86-64-v2-AES', nodes: ['pve1', 'pve2'] } });
  expect(fs.readFileSync(cacheFile, 'utf8')).toBe('x86-64-v2-AES\nnodes=pve1,pve2\n');
});

test('a refresh that cannot read the nodes answers 502 and leaves the cache alone', async () => {
  await injectFaultOn(h, { op: 'GET /nodes' }, { stderr: 'cluster not ready - no quorum?', times: 1 });
  const res = await refresh();
  expect(res.status).toBe(502);
  expect(res.json).toMatchObject({ success: false, message: expect.stringContaining('no quorum') });
  expect(fs.readFileSync(cacheFile, 'utf8')).toBe('x86-64-v2-AES\nnodes=pve1,pve2\n');
});
