import fs from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime, Worker, type ReplayResult } from '@temporalio/worker';
import * as workflows from '../../workflows';
import { historyScenarios } from './support/historyScenarios';
import { workerSinks } from '../../worker/sinks';
import { createMetrics } from '../../lib/observability/metrics';

/**
 * Replay before deploy: every recorded history (test/fixtures/histories/, made by
 * `npm run fixtures:histories`) is replayed against the workflow code as it is now. A
 * change that makes a workflow issue other commands than its recorded runs did (an activity
 * added, removed or moved, a timer changed, a child started elsewhere) fails here, before a
 * worker running it meets histories of workflows already in flight. No server is needed.
 */

const DIR = path.join(__dirname, '..', 'fixtures', 'histories');
/** The id each history's workflow ran under: its code may read it, so the replay must use it. */
const WORKFLOW_IDS = 'workflow-ids.json';
const workflowIds = JSON.parse(fs.readFileSync(path.join(DIR, WORKFLOW_IDS), 'utf8')) as Record<string, string>;

interface Fixture {
  name: string;
  workflowId: string;
  workflowType: string;
  history: { events: Array<Record<string, any>> };
}

const fixtures: Fixture[] = fs
  .readdirSync(DIR)
  .filter((f) => f.endsWith('.json') && f !== WORKFLOW_IDS)
  .sort()
  .map((f) => {
    const history = JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')) as Fixture['history'];
    const workflowType = history.events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name as string;
    const name = f.replace(/\.json$/, '');
    return { name, workflowId: workflowIds[name], workflowType, history };
  });

beforeAll(() => {
  try {
    // A failing replay is reported by the test; core's own WARN lines would only repeat it.
    const level = (process.env.TEST_LOG_LEVEL ?? 'ERROR') as 'ERROR';
    Runtime.install({ logger: new DefaultLogger(level), telemetryOptions: { logging: { filter: { core: level, other: level } } } });
  } catch {
    // Already installed in this test file.
  }
});

test('every workflow type the worker registers has a recorded history, and every scenario its file', () => {
  const covered = new Set(fixtures.map((f) => f.workflowType));
  expect(Object.keys(workflows).filter((type) => !covered.has(type))).toEqual([]);
  expect(historyScenarios.map((s) => s.name).filter((name) => !fixtures.some((f) => f.name === name))).toEqual([]);
  expect(fixtures.filter((f) => !f.workflowId).map((f) => `${f.name} has no entry in ${WORKFLOW_IDS}`)).toEqual([]);
});

test('every recorded history replays against the current workflow code', async () => {
  const bundlePath = process.env.WORKFLOW_TEST_BUNDLE;
  if (!bundlePath) throw new Error('WORKFLOW_TEST_BUNDLE unset: run through jest (globalSetup bundles the workflows)');
  const results: ReplayResult[] = [];
  const histories = fixtures.map((f) => ({ workflowId: f.workflowId, history: f.history }));
  for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: bundlePath }, replayName: 'fixtures', sinks: workerSinks({ metrics: createMetrics() }) }, histories)) {
    results.push(result);
  }
  // One result per history, in the order given (several lifecycle runs share the id vm-130).
  expect(results.map((r) => r.workflowId)).toEqual(histories.map((h) => h.workflowId));
  const failures = results
    .map((r, i) => (r.error ? `${fixtures[i].name}: ${r.error instanceof Error ? r.error.message : String(r.error)}` : undefined))
    .filter(Boolean);
  expect(failures).toEqual([]);
});
