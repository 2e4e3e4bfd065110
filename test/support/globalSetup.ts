import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { slimWorkflowBundle, workflowBundlerOptions } from '../../worker/bundleOptions';
import { startDevServer, DevServer } from '../../lib/temporal/devServer';
import { freePort } from '../../lib/network';
import { ensureSandboxTools } from '../../sandbox/requirements';
import { allTestNamespaces } from './namespaces';

/**
 * One real Temporal dev server for the whole test run, on free loopback ports, and the
 * workflow code bundled once (bundling takes seconds; every test worker reuses it).
 */
export default async function globalSetup(): Promise<void> {
  // The same check (and, as root with apt-get, the same install) as `npm start`.
  await ensureSandboxTools();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-test-'));
  const server = await startOnFreePorts(dir);
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../workflows'),
    ...workflowBundlerOptions,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  // As `npm run build` writes it: what the service runs is what is tested.
  fs.writeFileSync(bundlePath, slimWorkflowBundle(bundle.code));

  process.env.TEST_TEMPORAL_ADDRESS = server.address;
  process.env.TEST_TEMPORAL_UI_URL = server.uiUrl ?? '';
  process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
  process.env.TEST_TMP_DIR = dir;
  (globalThis as Record<string, unknown>).__qemurunTemporal = server;
}

/**
 * Ports found free can be taken before the server binds them (start-dev opens further
 * ports of its own choosing meanwhile): a bind failure is retried on other ports.
 */
async function startOnFreePorts(dir: string): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    const suffix = attempt === 1 ? '' : `-${attempt}`;
    const logFile = path.join(dir, `temporal${suffix}.log`);
    try {
      return await startDevServer({
        port: await freePort(),
        uiPort: await freePort(),
        namespace: 'default',
        extraNamespaces: allTestNamespaces(),
        dbFile: path.join(dir, `temporal${suffix}.db`),
        logFile,
      });
    } catch (err) {
      const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
      if (attempt >= 3 || !/address already in use/.test(log)) throw err;
    }
  }
}
