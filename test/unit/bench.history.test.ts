import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { billableEvents, billableSummary } from '../../scripts/bench/history';

/** The bench's count of billable events, on recorded histories. */

const recorded = (name: string) => historyFromJSON(JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'histories', `${name}.json`), 'utf8')));

test('an image install recorded on the current code (migrated, rebooted): each billable kind counted', () => {
  const b = billableEvents(recorded('installVm-side-by-side'));
  expect(b.byKind).toEqual({ start: 1, activity: 18, upsert: 4, marker: 2, signal: 2 });
  expect(billableSummary(b)).toBe('27 (18 activity, 4 upsert, 2 marker, 2 signal, 1 start)');
});

test('an activity that ran twice is billed twice', () => {
  const history = recorded('installVm-side-by-side');
  const started = history.events!.find((e) => e.activityTaskStartedEventAttributes)!;
  started.activityTaskStartedEventAttributes!.attempt = 2;
  expect(billableEvents(history).byKind.activity).toBe(19);
});
