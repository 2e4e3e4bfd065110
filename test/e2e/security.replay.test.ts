import { execa } from 'execa';
import { findTemporalCli, LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';

/**
 * A VM command recorded in history, started again later. Its input is encrypted and bound
 * to its workflow id, but that is all the codec can say: anyone who reaches the Temporal
 * server can start the very same payload again under the same id and type. Each command
 * now names the VM instance (its SMBIOS uuid, read when the API accepted it) and the
 * workflow id it was issued for, and carries its issue time: the recorded stop and
 * destroy of a VM that is gone do not touch the later VM at its VMID, and an input of
 * `vm-<vmid>` started under `vm-<vmid>-<time>` (which the codec's schedule rule lets
 * through) is refused, outside the per-VM lock or not.
 */

let h: Harness;
const VMID = 200;
const cli = findTemporalCli()?.path ?? LOCAL_CLI_PATH;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

async function qm(...args: string[]): Promise<string> {
  return (await execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } })).stdout;
}

/** A VM at VMID made in Proxmox and taken into the managed set, as another caller's would be. */
async function managedVm(name: string): Promise<string> {
  await qm('create', String(VMID), '--name', name, '--cores', '1', '--memory', '512');
  const adopt = await apiCall(h.api, 'POST', `/vm/${VMID}/adopt`);
  expect(adopt.status).toBe(200);
  return uuidOf(await qm('config', String(VMID)));
}

const uuidOf = (config: string) => /^smbios1: uuid=([0-9a-f-]{36})/m.exec(config)![1];

/** The latest `vm-<vmid>` run's start payload as the server holds it: ciphertext and its metadata. */
async function recordedInput(type: string): Promise<{ data: string; meta: string[] }> {
  const history = await h.service.client.workflowService.getWorkflowExecutionHistory({ namespace: h.config.temporal.namespace, execution: { workflowId: `vm-${VMID}` } });
  const started = history.history!.events!.find((e) => e.workflowExecutionStartedEventAttributes)!.workflowExecutionStartedEventAttributes!;
  expect(started.workflowType?.name).toBe(type);
  const payload = started.input!.payloads![0];
  return {
    data: Buffer.from(payload.data!).toString('base64'),
    meta: Object.entries(payload.metadata!).flatMap(([k, v]) => ['--input-meta', `${k}=${Buffer.from(v).toString('utf8')}`]),
  };
}

/** `temporal workflow execute` of a recorded payload, as it is, against the test server. */
async function replay(type: string, input: { data: string; meta: string[] }, workflowId: string) {
  const run = await execa(
    cli,
    [
      'workflow', 'execute',
      '--address', process.env.TEST_TEMPORAL_ADDRESS!,
      '--namespace', h.config.temporal.namespace,
      '--type', type,
      '--task-queue', h.config.temporal.taskQueue,
      '--workflow-id', workflowId,
      '--input', input.data,
      ...input.meta,
      '--input-base64',
      '--execution-timeout', '5m',
    ],
    { reject: false },
  );
  const history = await h.service.client.workflow.getHandle(workflowId).fetchHistory();
  return { exitCode: run.exitCode, history: JSON.stringify(history.events ?? []) };
}

test('a recorded vmStop and vmDestroy of a destroyed VM, started again under vm-<vmid>, leave the later VM at that VMID alone', async () => {
  const first = await managedVm('first');
  await qm('start', String(VMID));
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/stop`)).status).toBe(200);
  const stop = await recordedInput('vmStop');
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/destroy`)).status).toBe(200);
  const destroy = await recordedInput('vmDestroy');
  await expect(qm('config', String(VMID))).rejects.toThrow(/does not exist/);

  // Another caller's VM gets the VMID, and runs.
  const second = await managedVm('second');
  expect(second).not.toBe(first);
  await qm('start', String(VMID));

  const stopped = await replay('vmStop', stop, `vm-${VMID}`);
  expect(stopped.exitCode).not.toBe(0);
  expect(stopped.history).toMatch(/VmInstanceError/);
  expect(stopped.history).toMatch(new RegExp(`its SMBIOS uuid is ${second}, not ${first}`));
  expect(await qm('status', String(VMID))).toBe('status: running');

  await qm('stop', String(VMID));
  const destroyed = await replay('vmDestroy', destroy, `vm-${VMID}`);
  expect(destroyed.exitCode).not.toBe(0);
  expect(destroyed.history).toMatch(/VmInstanceError/);
  expect(await qm('config', String(VMID))).toMatch(/^name: second$/m);
});

test('an input issued for vm-<vmid>, started under vm-<vmid>-<time>, is refused before its first step', async () => {
  await qm('start', String(VMID));
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/stop`)).status).toBe(200);
  const stop = await recordedInput('vmStop');
  await qm('start', String(VMID));

  // The codec lets a schedule's run id (`<id>-<RFC 3339 time>`) read its action's payload.
  const run = await replay('vmStop', stop, `vm-${VMID}-${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`);
  expect(run.exitCode).not.toBe(0);
  expect(run.history).toMatch(/StaleCommandError/);
  expect(run.history).toMatch(new RegExp(`issued for workflow vm-${VMID} under workflow vm-${VMID}-`));
  expect(run.history).not.toMatch(/activityTaskScheduledEventAttributes/);
  expect(await qm('status', String(VMID))).toBe('status: running');
});

test('a VM without an SMBIOS uuid, which a later VM could not be told from, gets no command: 409 VmInstanceError', async () => {
  await qm('set', String(VMID), '--delete', 'smbios1');
  const stop = await apiCall(h.api, 'POST', `/vm/${VMID}/stop`);
  expect(stop.status).toBe(409);
  expect(stop.json).toMatchObject({ type: 'VmInstanceError', message: expect.stringMatching(new RegExp(`^VM ${VMID} has no SMBIOS uuid`)) });
  expect(await qm('status', String(VMID))).toBe('status: running');
});
