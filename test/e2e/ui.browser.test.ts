import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { browserSuite, launchBrowser, type Browser } from '../support/browser';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { eventually, waitFor } from '../../sandbox/testkit';

/**
 * What an operator reads in the Temporal Web UI of the embedded dev server (the one
 * jest's globalSetup starts), in a real browser: Debian's headless chromium driven by
 * playwright-core (which downloads no browser). Screenshots go to test-artifacts/.
 * Without chromium the test is skipped on a workstation, and fails in CI.
 */

const ARTIFACTS = path.resolve(__dirname, '..', '..', 'test-artifacts');
const VMID = 161;
const SCHEDULE = `rebuild-vm-${VMID}`;
/** The install's cloud-init password and the root password: never on any page. */
const PASSWD = 'UiS3cret!passwd';
const ROOT_PASSWORD = 'UiR00t!password';

const suite = browserSuite('Temporal UI');

suite('the Temporal UI shows what QemuRun did', () => {
  let h: Harness;
  let ui: string;
  let installId: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    ui = process.env.TEST_TEMPORAL_UI_URL ?? '';
    if (!ui) throw new Error('TEST_TEMPORAL_UI_URL unset: the dev server was started without its UI');
    // The UI's origin may call the codec endpoint (the last test points the UI at it).
    const uiOrigin = new URL(ui);
    h = await startHarness({
      VM_ROOT_PASSWORD: ROOT_PASSWORD,
      CODEC_UI_ORIGINS: `http://127.0.0.1:${uiOrigin.port},http://localhost:${uiOrigin.port}`,
    });
    const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: VMID, name: 'ui', passwd: PASSWD } });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    installId = res.headers['x-workflow-id'] as string;
    const created = await fetch(`${h.api}/schedules`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ vmid: VMID, cron: '0 3 * * *', note: 'nightly rebuild of the UI test VM' }),
    });
    expect(created.status).toBe(201);

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchBrowser({ width: 1400, height: 1000 });
    page = browser.page;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await h?.service.client.schedule.getHandle(SCHEDULE).delete().catch(() => undefined);
    await h?.stop();
  });

  const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  /** Opens a workflows list with a visibility query, reloading until `workflowId` shows (visibility lags). */
  async function openWorkflowList(query: string, workflowId: string) {
    const url = `${ui}/namespaces/${h.config.temporal.namespace}/workflows?query=${encodeURIComponent(query)}`;
    const link = page.getByRole('link', { name: workflowId, exact: true }).first();
    return eventually(async () => {
      await page.goto(url);
      await link.waitFor({ state: 'visible', timeout: 5000 });
      return link;
    }, 60_000, 0);
  }

  test('an install, found by its VmId, shows its activities by name in its event history', async () => {
    const link = await openWorkflowList(`VmId=${VMID}`, installId);
    await shot('ui-workflows-by-vmid');
    expect(await page.locator('body').innerText()).toContain(installId);

    await link.click();
    await page.waitForURL(new RegExp(`/workflows/${installId}/[^/]+/history`));
    await page.getByText('installVm', { exact: true }).first().waitFor();
    for (const activity of ['checkStorage', 'downloadImage', 'createVm', 'importDisk', 'configureVm', 'startVm', 'waitForSsh', 'runInitScript']) {
      await page.getByText(activity, { exact: true }).first().waitFor();
    }
    await shot('ui-install-history');
    // The codec keeps inputs and results unreadable without the key (no codec endpoint here).
    expect(await page.locator('body').innerText()).toContain('YmluYXJ5L2VuY3J5cHRlZA=='); // base64 of binary/encrypted
  });

  test('the Schedules page lists the rebuild schedule, and its page shows what it starts', async () => {
    await page.goto(`${ui}/namespaces/${h.config.temporal.namespace}/schedules`);
    const link = page.getByRole('link', { name: SCHEDULE, exact: true });
    await link.waitFor();
    const row = await page.locator('body').innerText();
    expect(row).toContain('scheduledRebuild');
    expect(row).toContain('0 3 * * *'); // the cron expression, kept as the calendar's comment
    await shot('ui-schedules');

    await link.click();
    await page.waitForURL(new RegExp(`/schedules/${SCHEDULE}`));
    await page.getByText('scheduledRebuild').first().waitFor();
    await page.getByText('nightly rebuild of the UI test VM').first().waitFor();
    await shot('ui-schedule');
  });

  test('a scheduled run is found by its schedule, with its rebuild child', async () => {
    const t0 = Date.now() - 1000;
    expect((await fetch(`${h.api}/schedules/${SCHEDULE}/trigger`, { method: 'POST', headers: { 'Content-Type': 'application/json' } })).status).toBe(202);
    type Run = { workflowId: string; outcome: string; startedAt: string };
    const run = await waitFor('the scheduled run to finish', async () => {
      const body = (await (await fetch(`${h.api}/schedules/${SCHEDULE}`)).json()) as { schedule: { recentRuns: Run[] } };
      const last = body.schedule.recentRuns.filter((r) => Date.parse(r.startedAt) >= t0).at(-1);
      return last && last.outcome !== 'running' ? last : undefined;
    }, 90_000, 500);
    expect(run.outcome).toBe('rebuilt');

    const link = await openWorkflowList(`TemporalScheduledById = '${SCHEDULE}'`, run.workflowId);
    await shot('ui-scheduled-runs');
    await link.click();
    await page.getByText('scheduledRebuild', { exact: true }).first().waitFor();
    await page.getByText('Child Workflow Execution Completed').first().waitFor();
    await shot('ui-scheduled-run');

    await openWorkflowList(`VmId=${VMID} AND VmOperation='rebuild' AND WorkflowType='vmRebuild'`, `vm-${VMID}`);
    await shot('ui-rebuilds-by-vmid');
  });

  test('through the codec endpoint an install reads in clear, and no secret is on its page', async () => {
    // The UI's own "codec server" setting, kept in the browser's localStorage: set before
    // any of the UI's scripts run on each page load.
    await page.context().addInitScript((endpoint) => {
      const storage = (globalThis as unknown as { localStorage: { setItem(k: string, v: string): void } }).localStorage;
      storage.setItem('endpoint', JSON.stringify(endpoint));
      storage.setItem('overrideRemoteCodecConfiguration', 'true');
    }, `${h.service.url}/codec`);
    await page.goto(`${ui}/namespaces/${h.config.temporal.namespace}/workflows/${installId}`);
    await page.getByText('installVm', { exact: true }).first().waitFor();
    // Decoded: the spec is there to read, the secrets are not.
    await page.getByText(/redacted/).first().waitFor({ timeout: 30_000 });
    await page.getByText(/"os": ?"debian"/).first().waitFor();
    // Open every activity's details too: configureVm and runInitScript took the passwords.
    for (const activity of ['configureVm', 'runInitScript']) {
      await page.getByText(activity, { exact: true }).first().click();
    }
    await page.waitForTimeout(2000);
    await shot('ui-install-decoded');
    const text = await page.locator('body').innerText();
    const html = await page.content();
    for (const secret of [PASSWD, ROOT_PASSWORD]) {
      expect({ secret, inText: text.includes(secret), inHtml: html.includes(secret) }).toEqual({ secret, inText: false, inHtml: false });
    }
    expect(text).not.toContain('YmluYXJ5L2VuY3J5cHRlZA==');
  });
});
