import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../lib/network';
import { freePorts, waitFor } from '../../sandbox/testkit';
import { addFault, clearFaults } from '../../sandbox/state/faults';
import { buildIfStale, startServiceProcess, type ServiceProcess } from '../support/serviceProcess';
import { killVms } from '../../sandbox/state/runtime';

/**
 * Metrics and logs of the service as an operator runs it (dist/main.js, its own Temporal
 * dev server and sandbox): after real installs, /metrics counts them by OS and failing
 * step, the SDK's exporter answers, every log line is JSON, activity lines say which
 * workflow, VM, activity and attempt they belong to, and no secret appears anywhere.
 */

const PASSWD = 'Cloud-init-pa55word-7f3e';
const ROOT_PASSWORD = 'Root-pa55word-for-init-91c2';
const API_TOKEN = 'api-token-0123456789abcdef-5b1d';
const ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');
const SECRETS = [PASSWD, ROOT_PASSWORD, API_TOKEN, ENCRYPTION_KEY];

let dir: string;
let dataDir: string;
let service: ServiceProcess;
let base: string;
let temporalMetrics: string;

beforeAll(async () => {
  await buildIfStale();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-observability-'));
  dataDir = path.join(dir, 'data');
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  temporalMetrics = `127.0.0.1:${await freePort()}`;
  service = await startServiceProcess({
    PORT: String(port),
    DATA_DIR: dataDir,
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
    VM_SSH_PORT: String(await freePort()),
    SANDBOX_BOOT_DELAY_MS: '300',
    TEMPORAL_METRICS_ADDRESS: temporalMetrics,
    // The most lines there can be: a secret has every chance to show up.
    LOG_LEVEL: 'debug',
    API_TOKEN,
    VM_ROOT_PASSWORD: ROOT_PASSWORD,
    ENCRYPTION_KEYS: `k1:${ENCRYPTION_KEY}`,
  });
}, 240_000);

afterAll(async () => {
  if (service) {
    service.child.kill('SIGTERM');
    await service.child;
    killVms(path.join(dataDir, 'sandbox'));
  }
  if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const auth = { Authorization: `Bearer ${API_TOKEN}` };

async function installAsync(body: object): Promise<string> {
  const res = await fetch(`${base}/api/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async', ...auth },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(202);
  return res.headers.get('Location')!;
}

async function waitClosed(location: string): Promise<string> {
  return waitFor(`${location} to finish`, async () => {
    const s = (await (await fetch(new URL(location, base))).json()) as { status: string };
    return s.status !== 'RUNNING' && s.status;
  }, 240_000, 200);
}

/** The value of one sample, `name{labels}`, from Prometheus' text format; undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const scrape = async () => {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
};

test('after installs, /metrics counts them by OS, failing step, cache use and route', async () => {
  // One VMID race: the first `qm create` finds its ID taken by someone else.
  addFault(path.join(dataDir, 'sandbox'), { command: 'qm create', times: 1, stderr: "unable to create VM 0 - VM 0 already exists on node 'pve1'", exitCode: 255 });
  const ok = await installAsync({ os: 'debian', version: '12', name: 'metrics', passwd: PASSWD });
  const workflowId = ok.split('/').pop()!;

  // An event stream held open while scraping: the gauge sees it.
  const stream = await new Promise<http.ClientRequest>((resolve, reject) => {
    const req = http.get(`${base}/api/vm/install/${workflowId}/events`, { agent: false }, (res) => {
      res.resume();
      resolve(req);
    });
    req.on('error', reject);
  });
  const during = await scrape();
  stream.destroy();
  expect(sample(during, 'qemurun_event_streams_open')).toBe(1);
  expect(await waitClosed(ok)).toBe('COMPLETED');

  // A failing one: the import step's storage is disabled; the image comes from the cache.
  clearFaults(path.join(dataDir, 'sandbox'));
  addFault(path.join(dataDir, 'sandbox'), { command: 'qm importdisk', stderr: "storage 'local' is disabled", exitCode: 255 });
  const failed = await installAsync({ os: 'debian', version: '12', name: 'broken', passwd: PASSWD });
  expect(await waitClosed(failed)).toBe('FAILED');
  clearFaults(path.join(dataDir, 'sandbox'));

  const text = await scrape();
  const os = 'debian-12';
  expect(sample(text, 'qemurun_installs_started_total', { os })).toBe(2);
  expect(sample(text, 'qemurun_installs_completed_total', { os })).toBe(1);
  expect(sample(text, 'qemurun_installs_failed_total', { os, step: 'VM creation > import disk', reason: 'failed' })).toBe(1);
  expect(sample(text, 'qemurun_install_duration_seconds_count', { os, outcome: 'completed' })).toBe(1);
  expect(sample(text, 'qemurun_vmid_allocation_retries_total')).toBe(1);
  expect(sample(text, 'qemurun_image_cache_total', { result: 'miss' })).toBe(1);
  expect(sample(text, 'qemurun_image_cache_total', { result: 'hit' })).toBe(1);
  expect(sample(text, 'qemurun_image_downloaded_bytes_total')).toBeGreaterThan(1000);
  expect(sample(text, 'qemurun_step_duration_seconds_count', { activity: 'runInitScript', outcome: 'completed' })).toBe(1);
  expect(sample(text, 'qemurun_step_duration_seconds_count', { activity: 'importDisk', outcome: 'failed' })).toBe(1);
  expect(sample(text, 'qemurun_step_duration_seconds_count', { activity: 'createVm', outcome: 'completed' })).toBe(2);
  expect(sample(text, 'qemurun_event_streams_open')).toBe(0);
  // Routes by pattern: a workflow id never becomes a label.
  expect(sample(text, 'qemurun_http_requests_total', { method: 'POST', route: '/api/vm/install', status: '202' })).toBe(2);
  expect(sample(text, 'qemurun_http_requests_total', { method: 'GET', route: '/api/vm/install/:workflowId' })).toBeGreaterThan(0);
  expect(text).not.toContain(workflowId);
  expect(sample(text, 'qemurun_process_resident_memory_bytes')).toBeGreaterThan(0);

  // The Temporal SDK's own exporter: the worker's polls and completions.
  const sdk = await (await fetch(`http://${temporalMetrics}/metrics`)).text();
  expect(sample(sdk, 'temporal_workflow_completed', { workflow_type: 'installVm' })).toBeGreaterThanOrEqual(1);
  expect(sdk).toMatch(/^temporal_activity_execution_latency_bucket\{/m);
}, 300_000);

test('every log line is JSON; activity lines carry workflow, VM, activity and attempt; no secret anywhere', () => {
  const out = service.output();
  const banner = /^(\*\*\*|API: |Temporal( UI)?: |Images: |Task queue: |Proxmox (cluster|API): |> )/;
  const records = out
    .split('\n')
    .filter((l) => l.trim() !== '' && !banner.test(l))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON log line: ${l}`);
      }
    });
  expect(records.length).toBeGreaterThan(20);
  for (const r of records) expect(r).toMatchObject({ level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });

  const initScript = records.find((r) => r.msg === 'activity completed' && r.activity === 'runInitScript');
  expect(initScript).toMatchObject({ workflowId: expect.stringMatching(/^install-/), attempt: 1, activityType: 'runInitScript' });
  const configure = records.find((r) => r.msg === 'activity completed' && r.activity === 'configureVm');
  expect(configure).toMatchObject({ vmid: expect.any(Number), workflowId: expect.any(String), attempt: 1 });
  expect(records.some((r) => r.msg === 'activity failed' && r.activity === 'importDisk')).toBe(true);
  // The task token completes an activity from anywhere: never written.
  expect(records.filter((r) => r.taskToken !== undefined && r.taskToken !== '<hidden>')).toEqual([]);
  if (process.env.KEEP_TEST_TMP) fs.writeFileSync(path.join(dir, 'service.log'), out);

  for (const secret of SECRETS) expect(out).not.toContain(secret);
});
