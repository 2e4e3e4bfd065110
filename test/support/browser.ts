import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Debian's headless chromium driven by playwright-core (which downloads no browser), for
 * the browser tests. Without chromium a test is skipped on a workstation and fails in CI.
 */

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = fs.existsSync(CHROMIUM);

/** Loopback only: chromium's own calls home are turned off, and would be refused anyway. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** `describe`, or `describe.skip` (with a warning naming the fix) where chromium is missing outside CI. */
export function browserSuite(what: string): jest.Describe {
  if (!HAVE_CHROMIUM && !process.env.CI) {
    console.warn(`${CHROMIUM} not found: the ${what} browser test is skipped (apt-get install chromium; CI runs it)`);
  }
  return HAVE_CHROMIUM || process.env.CI ? describe : describe.skip;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/** A fresh chromium profile and its first page, closed and removed by `close`. */
export async function launchBrowser(viewport: { width: number; height: number }): Promise<Browser> {
  if (!HAVE_CHROMIUM) throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install chromium); CI must run this test`);
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, viewport });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  return {
    context,
    page,
    async close() {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
