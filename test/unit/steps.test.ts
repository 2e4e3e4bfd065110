import fs from 'node:fs';
import path from 'node:path';
import { installSteps, reconcileRemoveStep, reconcileSteps, sideBySideSteps, type StepDefinition } from '../../contract/steps';
import { SIDE_BY_SIDE } from '../../cli/render/model';

const doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'how-an-install-runs.md'), 'utf8');

/** The rows of the doc's step table: `| \`<step>\` | <what runs> |`. */
const docRows = doc
  .split('\n')
  .map((line) => /^\| `([^`]+ > [^`]+)` \| (.*) \|$/.exec(line))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => ({ wire: m[1], text: m[2] }));

const withActivities = (Object.values(installSteps) as StepDefinition[]).filter((s) => s.activities.length > 0);

test("an install's steps keep the names its event stream has always carried: clients match on them", () => {
  // Renaming one here breaks every client that waits for a step by name (the CLI, scripts
  // reading the SSE stream); docs/api.md documents them.
  expect(Object.values(installSteps).map((s) => s.wire)).toEqual([
    'preparation > workflow',
    'preparation > storage',
    'preparation > CPU baseline',
    'preparation > template',
    'OS preparation > download',
    'OS preparation > stage image',
    'SSH preparation > main node key',
    'VM creation > qm create',
    'VM creation > qm clone',
    'VM creation > import disk',
    'VM initialization > cloud-init',
    'VM initialization > migrate',
    'VM initialization > start',
    'VM initialization > guest address',
    'VM initialization > wait for SSH',
    'VM initialization > init script',
    'VM initialization > reboot',
    'VM initialization > finalizing',
  ]);
});

test('docs/how-an-install-runs.md lists every step that runs an activity, in order, under its name in the table', () => {
  expect(docRows.map((r) => r.wire)).toEqual(withActivities.map((s) => s.wire));
});

test("each step's row in the docs names every activity the table says it schedules", () => {
  const missing = withActivities.flatMap((s) => {
    const row = docRows.find((r) => r.wire === s.wire);
    return s.activities.filter((a) => !row?.text.includes(`\`${a}\``)).map((a) => `${s.wire}: ${a}`);
  });
  expect(missing).toEqual([]);
});

test("the reconciler's steps keep the names its stream carries, and each names an activity it schedules", () => {
  expect(Object.values(reconcileSteps).map((s) => s.wire)).toEqual([
    'reconcile > workflow',
    'reconcile > survey',
    'reconcile > remove',
    'reconcile > leases',
    'reconcile > finalizing',
  ]);
  expect(reconcileRemoveStep(123)).toBe('reconcile > remove 123');
  // The reconciler's own source schedules what the table says each step runs.
  const source = fs.readFileSync(path.join(__dirname, '..', '..', 'workflows', 'reconcile.ts'), 'utf8');
  const missing = (Object.values(reconcileSteps) as StepDefinition[]).flatMap((s) => s.activities.filter((a) => !source.includes(`.${a}(`)));
  expect(missing).toEqual([]);
});

test("the CLI's copy of the steps that run side by side is the contract's (it imports no service code)", () => {
  expect(SIDE_BY_SIDE).toEqual(sideBySideSteps.map((group) => group.map((branch) => branch.map((s) => s.wire))));
});
