/**
 * `npm run fixtures:histories`: records the history of every scenario in
 * historyScenarios.ts into test/fixtures/histories/<name>.json,
 * which test/workflows/replay.workflow.test.ts replays against the current workflow code.
 * Runs on Temporal's time-skipping test server with fake activities (seconds, no cluster,
 * the same every time); needs the server scripts/install-temporal-test-server.sh installs,
 * and the Temporal CLI, which writes each history in Temporal's own JSON format.
 * Regenerate after a workflow change that is meant to change histories (see
 * docs/development.md), never to make a failing replay pass.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundlerOptions } from '../../../worker/bundleOptions';
import { execa } from 'execa';
import { findTemporalCli } from '../../../lib/temporal/devServer';
import { historyScenarios } from './historyScenarios';
import { startWorkflowTestEnv } from './testEnv';

const OUT = path.resolve(__dirname, '..', '..', 'fixtures', 'histories');
const ROOT = path.resolve(__dirname, '..', '..', '..');
/** What the checkout's own path reads as in a recorded stack trace. */
const RECORDED_ROOT = '/qemurun';
/** name → the id the workflow ran under; every other .json file there is a history. */
const WORKFLOW_IDS = 'workflow-ids.json';

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-histories-'));
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../../workflows'),
    ...workflowBundlerOptions,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  process.env.WORKFLOW_TEST_BUNDLE = path.join(tmp, 'workflow-bundle.js');
  fs.writeFileSync(process.env.WORKFLOW_TEST_BUNDLE, bundle.code);

  const cli = findTemporalCli()?.path;
  if (!cli) throw new Error('the Temporal CLI is not installed: npm run setup:temporal');
  const t = await startWorkflowTestEnv();
  // A workflow's code may read its own id (an install writes it into the VM's owner
  // marker), so a replay must use the recorded one.
  const idsFile = path.join(OUT, WORKFLOW_IDS);
  const ids: Record<string, string> = fs.existsSync(idsFile) ? (JSON.parse(fs.readFileSync(idsFile, 'utf8')) as Record<string, string>) : {};
  try {
    fs.mkdirSync(OUT, { recursive: true });
    for (const scenario of historyScenarios) {
      if (only.length > 0 && !only.includes(scenario.name)) continue;
      const workflowId = await scenario.run(t);
      // The CLI's JSON is the format the Temporal UI's download and every SDK's replayer
      // use, so a history taken from production can sit beside these as it is.
      const { stdout } = await execa(cli, ['workflow', 'show', '--address', t.address, '--workflow-id', workflowId, '--output', 'json']);
      const file = path.join(OUT, `${scenario.name}.json`);
      // Failures carry stack traces: name the checkout by a fixed root, not where it was recorded.
      const json = JSON.stringify(JSON.parse(stdout), null, 2).split(`${ROOT}${path.sep}`).join(`${RECORDED_ROOT}/`);
      fs.writeFileSync(file, `${json}\n`);
      ids[scenario.name] = workflowId;
      console.log(`${path.relative(process.cwd(), file)}: ${(JSON.parse(stdout) as { events: unknown[] }).events.length} events`);
    }
    const sorted = Object.fromEntries(Object.entries(ids).sort(([a], [b]) => a.localeCompare(b)));
    fs.writeFileSync(idsFile, `${JSON.stringify(sorted, null, 2)}\n`);
  } finally {
    await t.teardown();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
