import fs from 'node:fs';
import path from 'node:path';

/**
 * Every end-to-end test file runs in a Temporal namespace of its own, created by the global
 * set-up: workflow ids such as `vm-131` and visibility queries such as `VmId = 131` are
 * namespace-wide, so a workflow one file left running would otherwise meet the next file's
 * install of the same VMID (a 409, or a workflow encrypted with another harness's key),
 * depending on the order the files run in. The api-mode project runs its files in
 * namespaces of their own again, so a file's two runs never share one either.
 */
const E2E_DIR = path.resolve(__dirname, '..', 'e2e');
const GUESTS_DIR = path.resolve(__dirname, '..', 'guests');

/** The namespace of one test file in one mode: `e2e-install-behaviour`, `api-rebuild`. */
export function namespaceFor(testPath: string, apiMode: boolean): string {
  const name = path.basename(testPath).replace(/\.test\.ts$/, '').replace(/[^A-Za-z0-9]+/g, '-');
  return `${apiMode ? 'api' : 'e2e'}-${name}`;
}

/** Every namespace a run may use: one per file of test/e2e/ and test/guests/, in each mode. */
export function allTestNamespaces(): string[] {
  const files = [E2E_DIR, GUESTS_DIR].flatMap((dir) =>
    fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.test.ts')).map((f) => path.join(dir, f)) : [],
  );
  return files.flatMap((f) => [namespaceFor(f, false), namespaceFor(f, true)]);
}

/** This test file's namespace, for a test that makes its own Temporal client or CLI call. */
export function testNamespace(): string {
  const namespace = process.env.TEST_TEMPORAL_NAMESPACE;
  if (!namespace) throw new Error('TEST_TEMPORAL_NAMESPACE unset: run through jest (test/support/namespaceSetup.ts sets it)');
  return namespace;
}
