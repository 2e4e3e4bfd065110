import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundlerOptions } from '../../../worker/bundleOptions';

/** The workflow code bundled once for every workflow test file (bundling takes seconds). */
export default async function globalSetup(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-workflow-test-'));
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../../workflows'),
    ...workflowBundlerOptions,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, bundle.code);
  process.env.WORKFLOW_TEST_BUNDLE = bundlePath;
}
