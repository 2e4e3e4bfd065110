import { execa } from 'execa';
import { WorkflowFailedError } from '@temporalio/client';
import { startHarness, Harness } from '../support/harness';
import { apiCall } from '../support/api';
import { executeWithCli, historyText, inputMetaArgs, recordedInput, temporalCli } from '../support/temporalCli';
import { isMutating, operations, operationsMark } from '../support/proxmoxCalls';

/**
 * The Temporal server as a way around the API: from the same host, the real CLI started
 * workflows on the service's task queue with plain JSON input, skipping ALLOW_IPS, the
 * token and every input check. The workers now refuse any payload the service's codec did
 * not encrypt for that very workflow, so such a workflow fails before its first step, the
 * cluster stays as it was, and the VM's id `vm-<id>` is not held busy.
 */

let h: Harness;
const VMID = 240;

beforeAll(async () => {
  h = await startHarness();
  await qm('create', String(VMID), '--name', 'target', '--cores', '2', '--memory', '512');
});

afterAll(async () => {
  await h?.stop();
});

async function qm(...args: string[]): Promise<string> {
  return (await execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } })).stdout;
}

const execute = (type: string, input: string, workflowId: string, extra: string[] = []) => executeWithCli(h, type, input, workflowId, extra);

test('temporal workflow execute --type vmSetCpu --input {"vmid":240,"cores":7}: refused, the VM keeps 2 cores', async () => {
  const before = await qm('config', String(VMID));
  const workflowId = `backdoor-setcpu-${Date.now()}`;
  const run = await execute('vmSetCpu', '{"vmid":240,"cores":7}', workflowId);
  expect(run.exitCode).not.toBe(0);
  // It failed on its input, at once: not a run left failing its tasks until a timeout.
  expect((await h.service.client.workflow.getHandle(workflowId).describe()).status.name).toBe('FAILED');
  expect(await historyText(h, workflowId)).toMatch(/not encrypted/);
  expect(await qm('config', String(VMID))).toBe(before);
  expect(before).toMatch(/^cores: 2$/m);
});

test('an installVm with an unchecked user and a key option reaches no qm command', async () => {
  const workflowId = `backdoor-install-${Date.now()}`;
  const input = JSON.stringify({
    spec: { os: 'debian', version: '12', vmid: 241, cpu: 1, ramMb: 512, diskGb: 16, user: 'x;touch /tmp/pwned', pubkey: 'command="touch /tmp/pwned" ssh-ed25519 AAAA' },
    secrets: { passwd: 'x' },
    mainNode: h.config.mainNode,
  });
  const run = await execute('installVm', input, workflowId);
  expect(run.exitCode).not.toBe(0);
  const history = await historyText(h, workflowId);
  // The worker failed every workflow task on decoding the input: no activity was scheduled.
  expect(history).not.toMatch(/activityTaskScheduledEventAttributes/);
  expect(history).toMatch(/not encrypted/);
  await expect(qm('config', '241')).rejects.toThrow(/does not exist/);
});

test('a plaintext run under vm-240 fails at once, and the API is not held busy by it', async () => {
  const run = await execute('vmStart', '{"vmid":240}', 'vm-240');
  expect(run.exitCode).not.toBe(0);
  const d = await h.service.client.workflow.getHandle('vm-240').describe();
  expect(d.status.name).toBe('FAILED');
  expect(JSON.stringify((await h.service.client.workflow.getHandle('vm-240').fetchHistory()).events)).not.toMatch(/activityTaskScheduledEventAttributes/);
  // An operation on VM 240 runs as vm-240 too: it is not refused as busy.
  const adopt = await apiCall(h.api, 'POST', `/vm/${VMID}/adopt`);
  expect(adopt.status).toBe(200);
});

test('an encrypted input copied from one workflow into another is refused', async () => {
  // The adoption's own input, as the server holds it: ciphertext bound to vm-240.
  const recorded = await recordedInput(h, `vm-${VMID}`);
  const meta = inputMetaArgs(recorded);
  expect(meta).toContain(`encryption-workflow-id=vm-${VMID}`);
  const input = recorded.data;

  // Given to the same type under another VM's id (and to another type): refused before any step.
  await qm('create', '242', '--name', 'other');
  for (const [type, workflowId] of [['vmAdopt', 'vm-242'], ['vmDestroy', `backdoor-replay-${Date.now()}`]]) {
    const run = await execute(type, input, workflowId, [...meta, '--input-base64']);
    expect(run.exitCode).not.toBe(0);
    const text = await historyText(h, workflowId);
    expect(text).toMatch(new RegExp(`payload of workflow \\\\?"vm-${VMID}\\\\?" given to workflow \\\\?"${workflowId}`));
    expect(text).not.toMatch(/activityTaskScheduledEventAttributes/);
  }
  expect(await qm('config', '242')).not.toMatch(/qemurun-owner/);
  // Without its binding metadata the same ciphertext fails authentication.
  const run = await execute('vmAdopt', input, 'vm-242', [...inputMetaArgs(recorded, ['encryption-workflow-id']), '--input-base64']);
  expect(run.exitCode).not.toBe(0);
  expect(await qm('config', '242')).not.toMatch(/qemurun-owner/);
});

test('an encrypted vmStop input of vm-240 started again as vmDestroy under vm-240 is refused: the VM stays', async () => {
  // An ordinary stop through the API: its input ({"vmid":240}) is all a vmDestroy needs.
  await qm('start', String(VMID));
  const stop = await apiCall(h.api, 'POST', `/vm/${VMID}/stop`);
  expect(stop.status).toBe(200);
  const recorded = await recordedInput(h, `vm-${VMID}`);
  expect(recorded.type).toBe('vmStop');
  const mark = await operationsMark(h);

  // Same id, so the codec's binding holds; only the type differs.
  const run = await execute('vmDestroy', recorded.data, `vm-${VMID}`, [...inputMetaArgs(recorded), '--input-base64']);
  expect(run.exitCode).not.toBe(0);
  const d = await h.service.client.workflow.getHandle(`vm-${VMID}`).describe();
  expect(d.type).toBe('vmDestroy');
  expect(d.status.name).toBe('FAILED');
  const text = await historyText(h, `vm-${VMID}`);
  expect(text).toMatch(/written for workflow type \\"vmStop\\" given to workflow type vmDestroy/);
  expect(text).not.toMatch(/activityTaskScheduledEventAttributes/);
  expect((await operations(h, mark)).filter(isMutating)).toEqual([]);
  expect(await qm('config', String(VMID))).toMatch(/^name: target$/m);
});

test('temporal workflow reset of a completed install does not run it again against the live VM', async () => {
  const res = await fetch(`${h.api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
    body: JSON.stringify({ os: 'debian', version: '12', name: 'kept', id: 243 }),
  });
  expect(res.status).toBe(202);
  const { workflowId } = (await res.json()) as { workflowId: string };
  const handle = h.service.client.workflow.getHandle(workflowId);
  await handle.result();
  const history = (await handle.fetchHistory()).events ?? [];
  // The workflow task right after createVm: a reset there would import a disk into the
  // live VM, reconfigure it, start it and run the init script on it again.
  const created = history.findIndex((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createVm');
  const resetAt = history.slice(created).find((e) => e.workflowTaskCompletedEventAttributes)!.eventId!.toString();
  const before = await h.sandbox.readConfig(243);
  const mark = await operationsMark(h);

  const reset = await execa(temporalCli, ['workflow', 'reset', '--address', process.env.TEST_TEMPORAL_ADDRESS!, '--namespace', h.config.temporal.namespace, '--workflow-id', workflowId, '--event-id', resetAt, '--reason', 'again', '-o', 'json']);
  const { runId } = JSON.parse(reset.stdout) as { runId: string };
  const again = h.service.client.workflow.getHandle(workflowId, runId);
  await expect(again.result()).rejects.toThrow(WorkflowFailedError);
  expect(JSON.stringify((await again.fetchHistory()).events)).toMatch(/ResetRunError/);
  expect((await operations(h, mark)).filter(isMutating)).toEqual([]);
  expect(await h.sandbox.readConfig(243)).toBe(before);
});
