import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { slimWorkflowBundle, workflowBundlerOptions } from '../../../worker/bundleOptions';

/** The workflow code bundled once for every workflow test file (bundling takes seconds). */
export default async function globalSetup(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-workflow-test-'));
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../../workflows'),
    ...workflowBundlerOptions,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  // As `npm run build` writes it: what the service runs is what is tested.
  fs.writeFileSync(bundlePath, slimWorkflowBundle(bundle.code));
  process.env.WORKFLOW_TEST_BUNDLE = bundlePath;
}
