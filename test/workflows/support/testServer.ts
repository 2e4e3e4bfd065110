import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { freePort } from '../../../lib/network';
import { workflowTypeBinding } from '../../../lib/temporal/typeBinding';

/**
 * The SDK's createTimeSkipping starts the server itself but gives it a fixed 5 s to accept
 * connections. The JVM is up in about a second on an idle 2-core machine, but not within
 * 5 s when the machine is busy (measured: "did not start within 5s" at a load average of
 * 12), so the tests start it here, wait as long as it takes (bounded), and then connect the
 * SDK's time-skipping client to it.
 */
const READY_WITHIN_MS = 90_000;

export interface TestServer {
  env: TestWorkflowEnvironment;
  /** host:port, for tools other than the SDK (the Temporal CLI). */
  address: string;
  stop(): Promise<void>;
}

export async function startTestServer(executable: string): Promise<TestServer> {
  const port = await freePort();
  const child = spawn(executable, [String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  // A test file that dies without its afterAll must not leave a JVM behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  try {
    await waitForPort(port, child, () => stderr);
    const env = await connectTimeSkipping(`127.0.0.1:${port}`);
    return {
      env,
      address: `127.0.0.1:${port}`,
      async stop() {
        await env.teardown();
        await stopProcess(child);
        process.off('exit', killOnExit);
      },
    };
  } catch (err) {
    await stopProcess(child);
    process.off('exit', killOnExit);
    throw err;
  }
}

/**
 * Not public API, because none does this: TestWorkflowEnvironment.createFromExistingServer
 * has no time skipping, and the public TimeSkippingWorkflowClient needs a Connection with
 * the test service, which only an internal connection option turns on (measured: "TestService
 * must be present"). The private `create` both public factories call does it, given
 * `supportsTimeSkipping` (what createTimeSkipping passes once its own server is up).
 * Checked, so an SDK that renames it fails loudly here.
 */
async function connectTimeSkipping(address: string): Promise<TestWorkflowEnvironment> {
  type Create = (opts: {
    server: { type: 'existing' };
    address: string;
    namespace: string;
    supportsTimeSkipping: true;
    client: { interceptors: ReturnType<typeof workflowTypeBinding> };
  }) => Promise<TestWorkflowEnvironment>;
  const create = (TestWorkflowEnvironment as unknown as { create?: Create }).create;
  if (typeof create !== 'function') throw new Error('@temporalio/testing no longer has TestWorkflowEnvironment.create: update test/workflows/support/testServer.ts');
  // Started as the service's client starts workflows: their inputs name their type.
  const env = await create.call(TestWorkflowEnvironment, {
    server: { type: 'existing' },
    address,
    namespace: 'default',
    supportsTimeSkipping: true,
    client: { interceptors: workflowTypeBinding() },
  });
  if (!env.supportsTimeSkipping) throw new Error('the test environment does not skip time');
  return env;
}

async function waitForPort(port: number, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + READY_WITHIN_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the Temporal test server exited (${child.exitCode ?? child.signalCode}) before accepting connections:\n${stderr()}`);
    }
    if (await accepts(port)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the Temporal test server did not accept connections on port ${port} within ${READY_WITHIN_MS / 1000}s:\n${stderr()}`);
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
