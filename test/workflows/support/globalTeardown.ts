import fs from 'node:fs';
import path from 'node:path';

export default async function globalTeardown(): Promise<void> {
  const bundle = process.env.WORKFLOW_TEST_BUNDLE;
  if (bundle) fs.rmSync(path.dirname(bundle), { recursive: true, force: true });
}
