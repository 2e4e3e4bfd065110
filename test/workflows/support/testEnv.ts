import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import { type Activities, ALL_SEARCH_ATTRIBUTES, type IssuedCommand, vmWorkflowId } from '../../../contract';
import { FakeCluster } from './fakeCluster';
import { startTestServer } from './testServer';
import { workerSinks } from '../../../worker/sinks';
import { createMetrics } from '../../../lib/observability/metrics';

/**
 * Workflow tests run the real workflow code on Temporal's Java time-skipping test server
 * (timers and retry back-offs pass instantly) with small fake activities per test. The
 * server comes from Maven Central through scripts/install-temporal-test-server.sh; nothing
 * is downloaded at test time.
 */
const serverPath =
  process.env.TEMPORAL_TEST_SERVER_PATH ?? path.resolve(__dirname, '../../../.tools/bin/temporal-test-server');

const missing = fs.existsSync(serverPath)
  ? undefined
  : `Temporal's time-skipping test server is not at ${serverPath}: ` +
    'run `bash scripts/install-temporal-test-server.sh` (needs java and mvn) or set TEMPORAL_TEST_SERVER_PATH';
// CI must not pass by skipping the whole layer.
if (missing && process.env.CI) throw new Error(missing);
if (missing) console.warn(`skipping the workflow tests: ${missing}`);

/** `describe`, or `describe.skip` (with the warning above) when the test server is not installed. */
export const describeWorkflows: jest.Describe =
  // Outside jest (recordHistories.ts) there is no describe, and none is needed.
  typeof describe === 'undefined' ? (undefined as unknown as jest.Describe) : missing ? describe.skip : describe;

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  /** The test server's host:port. */
  address: string;
  taskQueue: string;
  /**
   * Serves these activities (a FakeCluster's, usually) from the file's one worker while
   * `fn` runs; the next call replaces them.
   */
  withActivities<T>(activities: Activities, fn: () => Promise<T>): Promise<T>;
  /**
   * A VM command's input as the API issues it (contract IssuedCommand): for `workflowId`
   * (default `vm-<vmid>`), now on the test server's clock (which time skipping moves ahead
   * of this process's), for the fake VM's instance.
   */
  issue<I extends { vmid: number }>(input: I, over?: IssuedCommand): Promise<I & IssuedCommand>;
  teardown(): Promise<void>;
}

/** The SMBIOS uuid the workflow tests' commands name (their fake activities do not read one). */
export const FAKE_INSTANCE = '8d3c3f0e-5b0a-4c1e-9a51-6f1f2b2a1c30';

/**
 * One server and one worker per test file (each takes a second or two to start); each
 * test brings its own fakes. Tests in a file run one after another, so swapping the
 * activities the worker dispatches to between tests is safe.
 */
export async function startWorkflowTestEnv(): Promise<WorkflowTestEnv> {
  const bundlePath = process.env.WORKFLOW_TEST_BUNDLE;
  if (!bundlePath) throw new Error('WORKFLOW_TEST_BUNDLE unset: run through jest (globalSetup bundles the workflows)');
  quietLogs();
  const server = await startTestServer(serverPath);
  const { env } = server;
  // The service registers these at start; the test server refuses workflows that set
  // undefined ones (and cannot list them, so lib's ensureSearchAttributes does not apply).
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace,
    searchAttributes: Object.fromEntries(
      ALL_SEARCH_ATTRIBUTES.map((key) => [key.name, temporal.api.enums.v1.IndexedValueType[`INDEXED_VALUE_TYPE_${key.type}`]]),
    ),
  });

  let current: Activities = new FakeCluster().activities();
  const dispatch = Object.fromEntries(
    Object.keys(current).map((name) => [name, (input: unknown) => (current[name as keyof Activities] as (i: unknown) => Promise<unknown>)(input)]),
  );
  const taskQueue = `workflow-test-${process.pid}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace,
    taskQueue,
    activities: dispatch,
    workflowBundle: { codePath: bundlePath },
    // The workflows report to the metrics sink; the real one, counting into a registry of its own.
    sinks: workerSinks({ metrics: createMetrics() }),
    // A fake activity that waits for its cancellation hears of it on its next heartbeat.
    maxHeartbeatThrottleInterval: '100ms',
    defaultHeartbeatThrottleInterval: '100ms',
  });
  const running = worker.run();

  return {
    env,
    address: server.address,
    taskQueue,
    async withActivities(activities, fn) {
      current = activities;
      return fn();
    },
    async issue(input, over = {}) {
      return { ...input, instance: FAKE_INSTANCE, issuedAt: await env.currentTimeMs(), issuedFor: vmWorkflowId(input.vmid), ...over };
    },
    async teardown() {
      worker.shutdown();
      await running;
      await server.stop();
    },
  };
}

/**
 * Expected activity failures (the point of most of these tests) are logged at WARN by the
 * SDK and by its core; TEST_LOG_LEVEL=INFO brings them back.
 */
function quietLogs(): void {
  const level = (process.env.TEST_LOG_LEVEL ?? 'ERROR') as LogLevel;
  try {
    Runtime.install({ logger: new DefaultLogger(level), telemetryOptions: { logging: { filter: { core: level, other: level } } } });
  } catch {
    // Already installed in this test file: keep it.
  }
}
