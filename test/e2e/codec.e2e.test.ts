import { testNamespace } from '../support/namespaces';
import crypto from 'node:crypto';
import { execa } from 'execa';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { dataConverterFor } from '../../lib/temporal/codec';
import { findTemporalCli, LOCAL_CLI_PATH } from '../../lib/temporal/devServer';
import { startCodecServer } from '../fixtures/codec/codecServer';
import { codecWith, randomKey } from '../fixtures/codec/keys';
import type { CodecFixtureActivities } from '../fixtures/codec/workflows';

// Worker state chatter would bury test output; warnings still show.
Runtime.install({ logger: new DefaultLogger('WARN') });

/**
 * True if the text shows the secret, either as is or inside any base64 string in it
 * (the CLI prints payload data it cannot parse as base64).
 */
function reveals(text: string, secret: string): boolean {
  if (text.includes(secret)) return true;
  return (text.match(/[A-Za-z0-9+/_-]{16,}={0,2}/g) ?? []).some((t) => Buffer.from(t, 'base64').toString('latin1').includes(secret));
}

describe('encrypted history on a real Temporal server', () => {
  const address = process.env.TEST_TEMPORAL_ADDRESS!;
  const cli = findTemporalCli()?.path ?? LOCAL_CLI_PATH;
  const codec = codecWith([['e2e', randomKey()]]);
  const secret = `secret-${crypto.randomUUID()}`;
  const workflowId = `codec-e2e-${crypto.randomUUID()}`;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  let workflowBundle: { code: string };

  beforeAll(async () => {
    expect(address).toBeTruthy();
    // Our own tiny workflow: the product's workflows are edited by others and say nothing about the codec.
    workflowBundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../fixtures/codec/workflows'),
      logger: new DefaultLogger('WARN'),
    });
    connection = await Connection.connect({ address });
    nativeConnection = await NativeConnection.connect({ address });
  });
  afterAll(async () => {
    await nativeConnection?.close();
    await connection?.close();
  });

  test('history holds ciphertext only; the codec endpoint shows it decoded', async () => {
    const client = new Client({ connection, namespace: testNamespace(), dataConverter: dataConverterFor(codec) });
    const taskQueue = `codec-e2e-${crypto.randomUUID()}`;
    const activities: CodecFixtureActivities = { echo: async (s) => `echo:${s}` };
    const worker = await Worker.create({
      connection: nativeConnection,
      namespace: testNamespace(),
      taskQueue,
      workflowBundle,
      activities,
      dataConverter: dataConverterFor(codec),
    });
    const result = await worker.runUntil(
      client.workflow.execute('codecEcho', { taskQueue, workflowId, args: [{ secret }], memo: { note: secret } }),
    );
    expect(result).toEqual({ echoed: `echo:${secret}` });

    // What the server stored, read by a client without the codec.
    const plainClient = new Client({ connection, namespace: testNamespace() });
    const history = await plainClient.workflow.getHandle(workflowId).fetchHistory();
    const input = history.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
    expect(Buffer.from(input.metadata!.encoding!).toString()).toBe('binary/encrypted');

    const base = ['--workflow-id', workflowId, '--output', 'json', '--address', address, '--namespace', testNamespace()];
    const shown = await execa(cli, ['workflow', 'show', ...base]);
    // A real history came back, so "no secret in it" means something.
    expect(shown.stdout.length).toBeGreaterThan(100);
    expect(reveals(shown.stdout, secret)).toBe(false);
    const described = await execa(cli, ['workflow', 'describe', ...base]);
    expect(reveals(described.stdout, secret)).toBe(false);

    const codecServer = await startCodecServer(codec);
    try {
      const decoded = await execa(cli, ['workflow', 'show', ...base, '--codec-endpoint', codecServer.endpoint]);
      expect(reveals(decoded.stdout, secret)).toBe(true);
      expect(codecServer.posts).toContain('/codec/decode');
    } finally {
      await codecServer.close();
    }
  });
});
