import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };

/**
 * @temporalio/common, /proto and /worker must share one protobufjs: with a copy each,
 * a type made by one is not a Type to the other, and historyFromJSON (what the replay
 * tests read recorded histories with) fails with 'type must be a Type'.
 */
test('the lock holds one protobufjs, at the top, for every package that uses it', () => {
  const copies = Object.entries(lock.packages)
    .filter(([key]) => key.endsWith('node_modules/protobufjs'))
    .map(([key, v]) => `${key}@${v.version}`);
  expect(copies).toEqual([expect.stringMatching(/^node_modules\/protobufjs@8\./)]);
});
