import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../lib/network';
import { freePorts } from '../../sandbox/testkit';
import { listVms } from '../../sandbox/state/vmlist';
import { startImageServer } from '../support/imageServer';
import { requestSse } from '../support/sse';
import { buildIfStale, FORBID_TYPESCRIPT, startServiceProcess, type ServiceProcess } from '../support/serviceProcess';
import { killVms } from '../../sandbox/state/runtime';

/**
 * The compiled service (no TypeScript compiler allowed in its process) killed the way the
 * OOM killer or a dying container kills it, and its embedded Temporal dev server killed
 * under it: installs in flight complete, with one VM each, and nothing is left running.
 */

let dir: string;
let images: Awaited<ReturnType<typeof startImageServer>>;
let env: Record<string, string>;
let api: string;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  await buildIfStale();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-restart-'));
  images = await startImageServer();
  const port = await freePort();
  api = `http://127.0.0.1:${port}/api`;
  env = {
    PORT: String(port),
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    VM_SSH_PORT: String(await freePort()),
    SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
    // Long enough that "wait for SSH" is still waiting when the test strikes.
    SANDBOX_BOOT_DELAY_MS: '4000',
    ...images.env,
  };
}, 300_000);

afterAll(async () => {
  for (const s of running) if (s.child.exitCode === null) s.child.kill('SIGTERM');
  await Promise.all(running.map((s) => s.child));
  killVms(path.join(dir, 'data', 'sandbox'));
  await images?.stop();
  if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

async function start(): Promise<ServiceProcess> {
  const service = await startServiceProcess(env, ['-r', FORBID_TYPESCRIPT]);
  running.push(service);
  return service;
}

function record(name: string): { pid: number } {
  return JSON.parse(fs.readFileSync(path.join(env.DATA_DIR, 'run', `${name}.json`), 'utf8'));
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const state = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== 'Z';
  } catch {
    return false;
  }
}

/** Starts an install and resolves with its workflow id once its events reach `step`. */
async function installUntil(name: string, step: string): Promise<string> {
  const res = await fetch(`${api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ name, os: 'debian', version: '12' }),
  });
  expect(res.status).toBe(200);
  const workflowId = res.headers.get('x-workflow-id')!;
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of res.body!) {
    text += decoder.decode(chunk as Uint8Array, { stream: true });
    if (text.includes(`"step":"${step}"`)) break;
  }
  await res.body!.cancel().catch(() => undefined);
  expect(text).toContain(`"step":"${step}"`);
  return workflowId;
}

async function finalEvents(workflowId: string) {
  const res = await requestSse(`${api}/workflows/${workflowId}/events`, { timeoutMs: 240_000 });
  return res.events;
}

test('SIGKILL of the service mid-install: the next start clears its leftovers and the install completes with one VM', async () => {
  const first = await start();
  const leftovers = [record('temporal-dev-server').pid, record('sandbox-sshd-pve1').pid, record('sandbox-sshd-pve2').pid];

  const workflowId = await installUntil('crash', 'VM initialization > wait for SSH');
  first.child.kill('SIGKILL');
  await first.child;
  // What the OOM killer leaves: the dev server and the node sshds, still holding their ports.
  expect(leftovers.filter(isRunning)).toHaveLength(3);

  const second = await start();
  for (const pid of leftovers) expect(isRunning(pid)).toBe(false);
  expect(second.output()).toMatch(/stopped the Temporal dev server left running by a previous run/);
  expect(second.output()).toMatch(/stopped the sandbox node pve1's sshd left running by a previous run/);

  const events = await finalEvents(workflowId);
  expect(events.at(-1)?.message).toBe('[*] User: debian');
  const vms = listVms(path.join(env.DATA_DIR, 'sandbox'));
  expect(vms).toHaveLength(1);

  second.child.kill('SIGTERM');
  expect((await second.child).exitCode).toBe(0);
  // A clean stop leaves no records of running processes but the VM's own.
  expect(fs.readdirSync(path.join(env.DATA_DIR, 'run'))).toEqual([]);
}, 600_000);

test('the embedded dev server killed mid-install is restarted on the same database; readiness says Temporal is down meanwhile', async () => {
  const service = await start();
  const ready = await fetch(`${api}/health/ready`);
  expect(ready.status).toBe(200);

  // A dev server that stops answering: readiness names it, liveness stays ok.
  const frozen = record('temporal-dev-server').pid;
  process.kill(frozen, 'SIGSTOP');
  try {
    // Past the age a readiness report is reused for.
    await new Promise((r) => setTimeout(r, 1500));
    const down = await fetch(`${api}/health/ready`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as { message: string; checks: Record<string, string> };
    expect(body.message).toMatch(/^not ready: Temporal \(127\.0\.0\.1:\d+\) is down/);
    expect(body.checks['node pve1']).toBe('up');
    expect(await (await fetch(`${api}/health`)).text()).toBe('ok');
  } finally {
    process.kill(frozen, 'SIGCONT');
  }

  const workflowId = await installUntil('devkill', 'VM initialization > wait for SSH');
  const killed = record('temporal-dev-server').pid;
  process.kill(killed, 'SIGKILL');
  const events = await finalEvents(workflowId);
  expect(events.at(-1)?.message).toBe('[*] User: debian');
  expect(record('temporal-dev-server').pid).not.toBe(killed);
  expect(service.output()).toContain('restarting it on the same database');
  expect((await fetch(`${api}/health/ready`)).status).toBe(200);

  service.child.kill('SIGTERM');
  expect((await service.child).exitCode).toBe(0);
}, 600_000);
