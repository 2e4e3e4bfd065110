import { execa } from 'execa';
import { findTemporalCli, LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import { startHarness, Harness } from '../support/harness';

/**
 * The Temporal server as a way around the API: from the same host, the real CLI started
 * workflows on the service's task queue with plain JSON input, skipping ALLOW_IPS, the
 * token and every input check. The workers now refuse any payload the service's codec did
 * not encrypt, so such a workflow never runs a step, and the cluster stays as it was.
 */

let h: Harness;
const VMID = 240;
const cli = findTemporalCli()?.path ?? LOCAL_CLI_PATH;

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

/** `temporal workflow execute` against the test server; a short run timeout ends the wait. */
async function execute(type: string, input: string, workflowId: string) {
  return execa(
    cli,
    [
      'workflow', 'execute',
      '--address', process.env.TEST_TEMPORAL_ADDRESS!,
      '--namespace', 'default',
      '--type', type,
      '--task-queue', h.config.temporal.taskQueue,
      '--workflow-id', workflowId,
      '--input', input,
      '--execution-timeout', '8s',
    ],
    { reject: false },
  );
}

async function historyText(workflowId: string): Promise<string> {
  const history = await h.service.client.workflow.getHandle(workflowId).fetchHistory();
  return JSON.stringify(history.events ?? []);
}

test('temporal workflow execute --type vmSetCpu --input {"vmid":240,"cores":7}: refused, the VM keeps 2 cores', async () => {
  const before = await qm('config', String(VMID));
  const run = await execute('vmSetCpu', '{"vmid":240,"cores":7}', `backdoor-setcpu-${Date.now()}`);
  expect(run.exitCode).not.toBe(0);
  expect(`${run.stdout}\n${run.stderr}`).toMatch(/timed out|TimedOut|timeout/i);
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
  const history = await historyText(workflowId);
  // The worker failed every workflow task on decoding the input: no activity was scheduled.
  expect(history).not.toMatch(/activityTaskScheduledEventAttributes/);
  expect(history).toMatch(/not encrypted/);
  await expect(qm('config', '241')).rejects.toThrow(/does not exist/);
});
