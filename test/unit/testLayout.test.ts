import fs from 'node:fs';
import path from 'node:path';

/**
 * jest.config.js runs test/unit/, test/workflows/, test/proxmox/, test/e2e/ and test/guests/, one project each: a test
 * file anywhere else runs in none of them, and a unit test that starts a server makes the
 * fast project slow and its parallel workers fight over it.
 */

const TEST_DIR = path.join(__dirname, '..');
const PROJECT_DIRS = ['unit', 'workflows', 'proxmox', 'e2e', 'guests'];

function testFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return testFiles(p);
    return e.name.endsWith('.test.ts') ? [path.relative(TEST_DIR, p)] : [];
  });
}

/** What only an end-to-end test may start: the dev server, the sandbox, sshd, the service. */
const END_TO_END = [
  'startHarness', 'startTestCluster', 'startSandboxCluster', 'startNodeSshd', 'startServiceProcess',
  'spawnService', 'startRealTemporal', 'startStandaloneSandbox', 'startDevServer', 'Connection.connect',
  'NativeConnection', 'TestWorkflowEnvironment', 'TEST_TEMPORAL_ADDRESS', 'TEST_WORKFLOW_BUNDLE',
];

test('every test file sits in the folder of one jest project', () => {
  const stray = testFiles(TEST_DIR).filter((f) => !PROJECT_DIRS.includes(f.split(path.sep)[0]));
  expect(stray).toEqual([]);
});

test('unit tests start no Temporal server, sandbox cluster, sshd or service', () => {
  const unitTests = testFiles(path.join(TEST_DIR, 'unit')).filter((f) => f !== path.relative(TEST_DIR, __filename));
  const found = unitTests.flatMap((f) => {
    const text = fs.readFileSync(path.join(TEST_DIR, f), 'utf8');
    return END_TO_END.filter((name) => text.includes(name)).map((name) => `${f} uses ${name}: move it to test/e2e/`);
  });
  expect(found).toEqual([]);
});
