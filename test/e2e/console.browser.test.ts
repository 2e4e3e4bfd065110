import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { browserSuite, launchBrowser, type Browser } from '../support/browser';
import { startHarness, Harness } from '../support/harness';
import { makeKeyPair, sshExec, waitFor } from '../../sandbox/testkit';

/**
 * The web console the API serves at its root, in a real browser (Debian's headless
 * chromium driven by playwright-core, loopback only) against the real API, Temporal and
 * sandbox: a refused field, a whole install reloaded halfway, where its time went, the VM
 * list as each role sees it, and a destroy behind its confirmation. Screenshots go to
 * test-artifacts/console/, or to CONSOLE_SCREENSHOTS (docs/console for the docs' pictures).
 */

const SHOTS = path.resolve(process.env.CONSOLE_SCREENSHOTS ?? path.join(__dirname, '..', '..', 'test-artifacts', 'console'));
const READER = 'console-reader-token-0123456789';
const OPERATOR = 'console-operator-token-0123456789';
const ADMIN = 'console-admin-token-0123456789abc';
const VMID = 163;
const PASSWD = 'C0nsole!S3cret';

const suite = browserSuite('web console');

suite('the web console', () => {
  let h: Harness;
  let base: string;
  let browser: Browser;
  let page: Page;
  let userKey: ReturnType<typeof makeKeyPair>;
  let installId: string;

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-console-'));
    const tokens = path.join(dir, 'tokens');
    // The reader and the operator are one team's: a read token sees only its tenant's VMs.
    fs.writeFileSync(tokens, `read ${READER} viewer tenant=team\noperate ${OPERATOR} dev tenant=team\nadmin ${ADMIN} boss\n`, { mode: 0o600 });
    userKey = makeKeyPair(dir, 'console-user');
    // The init script's first package call is silent for a while: the install is still
    // running when the page reloads.
    h = await startHarness({ API_TOKENS_FILE: tokens }, { packageSilenceMs: 6000 });
    base = h.service.url;
    fs.mkdirSync(SHOTS, { recursive: true });
    browser = await launchBrowser({ width: 1280, height: 860 });
    page = browser.page;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.service.client.schedule.getHandle(`rebuild-vm-${VMID}`).delete().catch(() => undefined);
    await h?.stop();
  });

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });

  /** Opens the console with `token` typed into it (kept in the tab's sessionStorage). */
  async function openAs(token: string, hash: string) {
    await page.goto(`${base}/#${hash}`);
    await page.fill('#token-input', token);
    await page.click('#token button[type=submit]');
    await page.locator('#who').filter({ hasText: { [READER]: 'viewer (read)', [OPERATOR]: 'dev (operate)', [ADMIN]: 'boss (admin)' }[token] }).waitFor();
  }

  const api = (p: string, token = OPERATOR, init: RequestInit = {}) =>
    fetch(`${base}/api${p}`, { ...init, headers: { Authorization: `Bearer ${token}`, ...(init.method === 'POST' ? { 'Content-Type': 'application/json' } : {}), ...(init.headers ?? {}) } });

  test('the page is static files with a strict content policy, and whoami names the role', async () => {
    const index = await fetch(`${base}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(index.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect((await fetch(`${base}/js/main.js`)).headers.get('content-type')).toMatch(/javascript/);
    expect(await (await api('/whoami', READER)).json()).toEqual({ success: true, name: 'viewer', role: 'read', tokens: true });
    expect(await (await api('/whoami', OPERATOR)).json()).toEqual({ success: true, name: 'dev', role: 'operate', tokens: true });
    // A wrong token is refused here as everywhere.
    expect((await api('/whoami', 'no-such-token-0123456789')).status).toBe(401);
  });

  test("a refused field shows the API's own 400 message at that field", async () => {
    await openAs(OPERATOR, 'install');
    await page.fill('[name="name"]', 'not_a_dns_label');
    await page.fill('[name="disk"]', '16T');
    await page.click('form.install button[type=submit]');
    const nameError = page.locator('[data-field="name"] > .field-error');
    await nameError.filter({ hasText: /\S/ }).waitFor();
    // The very words of the API's answer to the same body, split at its fields.
    const answer = (await (await api('/vm/install', OPERATOR, { method: 'POST', body: JSON.stringify({ os: 'debian', version: '13', name: 'not_a_dns_label', disk: '16T' }) })).json()) as { message: string };
    const problems = Object.fromEntries(
      answer.message
        .replace(/^please check your input: /, '')
        .split('; ')
        .map((p) => [p.slice(0, p.indexOf(': ')), p.slice(p.indexOf(': ') + 2)]),
    );
    expect(Object.keys(problems).sort()).toEqual(['disk', 'name']);
    expect(await nameError.innerText()).toBe(problems.name);
    expect(await page.locator('[data-field="disk"] > .field-error').innerText()).toBe(problems.disk);
    expect(page.url()).toMatch(/#install$/); // nothing started
    await shot('install-refused');
  });

  test('a whole install: the steps as they run, a reload halfway picks the stream up, the ssh line logs in', async () => {
    await openAs(OPERATOR, 'install');
    await page.selectOption('[name="version"]', '12');
    await page.fill('[name="name"]', 'web');
    await page.fill('[name="pubkey"]', userKey.publicKey);
    await page.click('details summary');
    await page.fill('[name="id"]', String(VMID));
    await page.fill('[name="passwd"]', PASSWD);
    await shot('install-form');
    await page.click('form.install button[type=submit]');
    await page.waitForURL(/#install\/.+/);
    installId = decodeURIComponent(page.url().split('#install/')[1]);

    // Halfway: the init script runs (its package manager is silent for a while).
    await page.locator('li.step.running[data-step="VM initialization > init script"]').waitFor({ timeout: 60_000 });
    const doneBefore = await page.locator('li.step.done').count();
    expect(doneBefore).toBeGreaterThan(3);
    expect(await page.locator('main').innerText()).not.toMatch(/\b(null|undefined)\b/);
    await shot('install-running');

    const resumes: Array<string | undefined> = [];
    page.on('request', (r) => {
      if (r.url().endsWith(`/api/workflows/${encodeURIComponent(installId)}/events`)) resumes.push(r.headers()['last-event-id']);
    });
    await page.reload();
    // The steps seen before the reload are there at once, and the stream goes on from the last event.
    await page.locator('li.step.done').nth(doneBefore - 1).waitFor();
    await page.locator('[data-outcome="done"] code.ssh').waitFor({ timeout: 90_000 });
    expect(resumes).toHaveLength(1);
    expect(Number(resumes[0])).toBeGreaterThan(0);
    const names = await page.locator('li.step').evaluateAll((els) => els.map((e) => e.getAttribute('data-step')));
    expect(new Set(names).size).toBe(names.length); // no step twice
    expect(names).toEqual(expect.arrayContaining(['VM creation > qm create', 'VM initialization > init script']));
    expect(await page.locator('li.step.failed, li.step.running').count()).toBe(0);
    // The reboot step ran nothing: what it decided stays under it, as in the CLI.
    expect(await page.locator('li[data-step="VM initialization > reboot"] .note').innerText()).toMatch(/^no reboot needed: /);
    await shot('install-done');

    const status = (await (await api(`/vm/install/${installId}`, READER)).json()) as { result: { ip: string; user: string } };
    const ssh = await page.locator('code.ssh').innerText();
    expect(ssh).toBe(`ssh ${status.result.user}@${status.result.ip}`);
    // The line works: the key given in the form logs in as that user.
    const [user, host] = ssh.replace(/^ssh /, '').split('@');
    const login = await sshExec({ host, port: h.config.vmSshPort, username: user, privateKey: userKey.privateKey, command: 'id -un' });
    expect(login.stdout.trim()).toBe(user);
    // No secret in the page or what it keeps.
    const kept = await page.evaluate(() => JSON.stringify(Object.entries((globalThis as unknown as { sessionStorage: Record<string, string> }).sessionStorage)));
    expect(kept).not.toContain(PASSWD);
    expect(await page.content()).not.toContain(PASSWD);
  });

  test('where the time went: a bar per step of the finished install, from its own record', async () => {
    const answer = (await (await api(`/workflows/${installId}/steps`, READER)).json()) as { steps: Array<{ step: string; ms: number; status: string }> };
    expect(answer.steps.length).toBeGreaterThan(5);
    expect(new Set(answer.steps.map((s) => s.status))).toEqual(new Set(['done']));
    const script = answer.steps.find((s) => s.step === 'VM initialization > init script');
    expect(script!.ms).toBeGreaterThanOrEqual(5000); // the silent package manager's 6 s
    await page.goto(`${base}/#timeline/${encodeURIComponent(installId)}`);
    await page.locator('ol.timeline li').first().waitFor();
    expect(await page.locator('ol.timeline li').count()).toBe(answer.steps.length);
    const width = await page.locator('li[data-step="VM initialization > init script"] .bar').evaluate((el) => el.getBoundingClientRect().width);
    const track = await page.locator('li[data-step="VM initialization > init script"] .track').evaluate((el) => el.getBoundingClientRect().width);
    expect(width / track).toBeGreaterThan(0.1);
    // Beside it, the medians of the OS version's last installs (this one, from the image).
    const medians = (await (await api('/installs/step-medians?os=debian&version=12&last=5', READER)).json()) as {
      image: { installs: number; steps: Array<{ step: string; medianMs: number }> };
      template: { installs: number };
    };
    expect([medians.image.installs, medians.template.installs]).toEqual([1, 0]);
    expect(medians.image.steps.find((s) => s.step === 'VM initialization > init script')!.medianMs).toBe(script!.ms);
    await page.locator('section[data-section="medians"] tr[data-step="VM initialization > init script"]').waitFor();
    expect(await page.locator('section[data-section="medians"] th').allInnerTexts()).toEqual(['step', 'this install', 'image installs (1)', 'template installs (0)']);
    expect((await api('/installs/step-medians?os=debian&version=99', READER)).status).toBe(400);
    await shot('timeline');
  });

  test('the VM list is live, with owner, age and runs linking to the Temporal UI', async () => {
    await openAs(OPERATOR, 'vms');
    const row = page.locator(`tr[data-vmid="${VMID}"]`);
    await row.locator('td.running').waitFor();
    await row.locator('td', { hasText: /^dev$/ }).waitFor();
    expect(await row.innerText()).toContain(`127.0.0.${VMID}`);
    await row.locator('[data-action="runs"]').click();
    const link = page.locator('tr.runs a', { hasText: 'Temporal UI' }).first();
    expect(await link.getAttribute('href')).toMatch(new RegExp(`:${h.config.temporal.uiPort}/namespaces/${h.config.temporal.namespace}/workflows/${installId}/[0-9a-f-]+/history$`));
    await shot('vms');

    // Stopped behind the page's back: the row follows without a reload.
    expect((await api(`/vm/${VMID}/stop`, OPERATOR, { method: 'POST' })).status).toBe(200);
    await row.locator('td.stopped').waitFor({ timeout: 15_000 });

    // Started from the page: its event stream, read through fetch, ends when SSH answers.
    await row.locator('[data-action="start"]').click();
    const note = page.locator('tr.note td');
    await note.filter({ hasText: /^Start: / }).waitFor();
    await row.locator('td.running').waitFor({ timeout: 30_000 });
    expect(await note.innerText()).not.toMatch(/refused|working/);
    await row.locator('[data-action="stop"]').click();
    await row.locator('td.stopped').waitFor({ timeout: 15_000 });
    await note.filter({ hasText: 'Stop: ok' }).waitFor();
  });

  test('a read token sees the VMs and no button that would be refused', async () => {
    await openAs(READER, 'vms');
    const row = page.locator(`tr[data-vmid="${VMID}"]`);
    await row.waitFor();
    await page.waitForTimeout(500);
    for (const action of ['start', 'stop', 'reboot', 'rebuild', 'destroy']) expect(await page.locator(`[data-action="${action}"]`).count()).toBe(0);
    await shot('vms-read');
    await page.goto(`${base}/#install`);
    await page.locator('.notice', { hasText: 'needs the operate role' }).waitFor();
    expect(await page.locator('form.install').count()).toBe(0);
    await page.goto(`${base}/#templates`);
    await page.locator('section[data-section="templates"] h2').waitFor();
    await page.waitForTimeout(500);
    expect(await page.locator('button', { hasText: 'Build template' }).count()).toBe(0);
  });

  test('an admin adds a rebuild schedule from the page; a refused one says why; the operate role gets no form', async () => {
    await openAs(OPERATOR, 'templates');
    await page.locator('section[data-section="schedules"] p', { hasText: 'none' }).waitFor();
    expect(await page.locator('form[data-form="schedule"]').count()).toBe(0);

    await openAs(ADMIN, 'templates');
    const form = page.locator('form[data-form="schedule"]');
    await form.locator('[name="vmid"]').fill(String(VMID));
    await form.locator('[name="cron"]').fill('every minute');
    await form.locator('button').click();
    await form.locator('.error', { hasText: 'cron' }).waitFor();
    await form.locator('[name="cron"]').fill('0 3 * * *');
    await form.locator('[name="note"]').fill('nightly, from the console');
    await form.locator('button').click();
    const row = page.locator('section[data-section="schedules"] tr', { hasText: `rebuild-vm-${VMID}` });
    await row.waitFor();
    expect(await row.innerText()).toContain('nightly, from the console');
    const listed = (await (await api('/schedules', READER)).json()) as { schedules: Array<{ id: string; nextRun: string }> };
    expect(listed.schedules.map((x) => x.id)).toEqual([`rebuild-vm-${VMID}`]);
    expect(await row.innerText()).toContain(listed.schedules[0].nextRun);
  });

  test('destroy asks first, naming the VM; cancelled it keeps the VM, confirmed it is gone', async () => {
    await openAs(OPERATOR, 'vms');
    const row = page.locator(`tr[data-vmid="${VMID}"]`);
    await row.locator('td.stopped').waitFor();
    await row.locator('td', { hasText: /^dev$/ }).waitFor();
    await row.locator('[data-action="destroy"]').click();
    const dialog = page.locator('dialog#confirm');
    await dialog.waitFor();
    expect(await dialog.innerText()).toContain(`Destroy VM ${VMID} (web-${VMID})?`);
    await shot('destroy-confirm');
    await dialog.locator('button[value="cancel"]').click();
    await page.waitForTimeout(500);
    expect((await api(`/vm/${VMID}/status`, READER)).status).toBe(200);

    await row.locator('[data-action="destroy"]').click();
    await dialog.locator('button[value="ok"]').click();
    await row.waitFor({ state: 'detached', timeout: 30_000 });
    await waitFor('the VM to be gone', async () => ((await api(`/vm/${VMID}/status`, READER)).status === 404 ? true : undefined), 10_000, 200);
  });

  test('templates, schedules and address pools are listed', async () => {
    await openAs(OPERATOR, 'templates');
    for (const s of ['templates', 'schedules', 'address-pools']) {
      await page.locator(`section[data-section="${s}"] :is(table, p)`).first().waitFor();
    }
    expect(await page.locator('button', { hasText: 'Build template' }).count()).toBe(1);
    await shot('catalog');
  });
});
