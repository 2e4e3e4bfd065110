import { execa } from 'execa';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { executeWithCli, historyText, inputMetaArgs, recordedInput, type RecordedInput } from '../support/temporalCli';

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
async function recordedStart(type: string): Promise<RecordedInput> {
  const input = await recordedInput(h, `vm-${VMID}`);
  expect(input.type).toBe(type);
  return input;
}

/** `temporal workflow execute` of a recorded payload, as it is, against the test server. */
async function replay(type: string, input: RecordedInput, workflowId: string) {
  const run = await executeWithCli(h, type, input.data, workflowId, [...inputMetaArgs(input), '--input-base64']);
  return { exitCode: run.exitCode, history: await historyText(h, workflowId) };
}

test('a recorded vmStop and vmDestroy of a destroyed VM, started again under vm-<vmid>, leave the later VM at that VMID alone', async () => {
  const first = await managedVm('first');
  await qm('start', String(VMID));
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/stop`)).status).toBe(200);
  const stop = await recordedStart('vmStop');
  expect((await apiCall(h.api, 'POST', `/vm/${VMID}/destroy`)).status).toBe(200);
  const destroy = await recordedStart('vmDestroy');
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
  const stop = await recordedStart('vmStop');
  await qm('start', String(VMID));

  // The codec lets a schedule's run id (`<id>-<RFC 3339 time>`) read its action's payload.
  const run = await replay('vmStop', stop, `vm-${VMID}-${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`);
  expect(run.exitCode).not.toBe(0);
  expect(run.history).toMatch(/StaleCommandError/);
  expect(run.history).toMatch(new RegExp(`issued for workflow vm-${VMID} under workflow vm-${VMID}-`));
  expect(run.history).not.toMatch(/activityTaskScheduledEventAttributes/);
  expect(await qm('status', String(VMID))).toBe('status: running');
});

test('a VM without an SMBIOS uuid, which a later VM could not be told from, gets no command: 409', async () => {
  await qm('set', String(VMID), '--delete', 'smbios1');
  const stop = await apiCall(h.api, 'POST', `/vm/${VMID}/stop`);
  expect(stop.status).toBe(409);
  // Its markers are sealed to the uuid it had, so it has left the managed set (with
  // MANAGE_ALL_VMS, the same VM is refused as VmInstanceError: no uuid to bind a command to).
  expect(stop.json).toMatchObject({ type: 'NotManagedError', message: expect.stringMatching(/its markers are sealed for SMBIOS uuid [0-9a-f-]{36}, and this VM has none \(smbios1 was removed\)/) });
  expect(await qm('status', String(VMID))).toBe('status: running');
});
