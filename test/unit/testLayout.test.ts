import fs from 'node:fs';
import path from 'node:path';

/**
 * jest.config.js runs test/unit/, test/workflows/, test/proxmox/, test/e2e/ and test/guests/, one project each,
 * and the sandbox package's own tests, sandbox/test/unit/ (unit) and sandbox/test/cluster/
 * (proxmox): a test file anywhere else runs in none of them, and a unit test that starts a
 * server makes the fast project slow and its parallel workers fight over it.
 */

const TEST_DIR = path.join(__dirname, '..');
const PROJECT_DIRS = ['unit', 'workflows', 'proxmox', 'e2e', 'guests'];
const SANDBOX_TEST_DIR = path.join(__dirname, '..', '..', 'sandbox', 'test');
const SANDBOX_PROJECT_DIRS = ['unit', 'cluster'];

/** The test files under `dir`, relative to `root`. */
function testFiles(dir: string, root = TEST_DIR): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return testFiles(p, root);
    return e.name.endsWith('.test.ts') ? [path.relative(root, p)] : [];
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
  const sandboxStray = testFiles(SANDBOX_TEST_DIR, SANDBOX_TEST_DIR).filter((f) => !SANDBOX_PROJECT_DIRS.includes(f.split(path.sep)[0]));
  expect(sandboxStray).toEqual([]);
});

test('unit tests start no Temporal server, sandbox cluster, sshd or service', () => {
  const unitTests = [
    ...testFiles(path.join(TEST_DIR, 'unit')).filter((f) => f !== path.relative(TEST_DIR, __filename)).map((f) => path.join(TEST_DIR, f)),
    ...testFiles(path.join(SANDBOX_TEST_DIR, 'unit'), SANDBOX_TEST_DIR).map((f) => path.join(SANDBOX_TEST_DIR, f)),
  ];
  const found = unitTests.flatMap((file) => {
    const text = fs.readFileSync(file, 'utf8');
    return END_TO_END.filter((name) => text.includes(name)).map((name) => `${path.relative(TEST_DIR, file)} uses ${name}: move it to an end-to-end or cluster project`);
  });
  expect(found).toEqual([]);
});
