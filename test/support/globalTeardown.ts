import fs from 'node:fs';
import type { DevServer } from '../../lib/temporal/devServer';

export default async function globalTeardown(): Promise<void> {
  const server = (globalThis as Record<string, unknown>).__qemurunTemporal as DevServer | undefined;
  await server?.stop();
  if (process.env.TEST_TMP_DIR && !process.env.KEEP_TEST_TMP) {
    fs.rmSync(process.env.TEST_TMP_DIR, { recursive: true, force: true });
  }
}
