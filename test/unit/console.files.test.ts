import fs from 'node:fs';
import path from 'node:path';
import type { StreamEvent } from '../../cli/events';
import { ProgressModel } from '../../cli/render/model';
import { sideBySideSteps } from '../../contract/steps';
import { CONSOLE_DIR } from '../../api/console';
import { stepTimeline } from '../../api/stepTimeline';
import { stepMedians } from '../../api/installTimes';
import { REPO_ROOT } from '../../lib/repoRoot';

/**
 * The web console is files served as they are: every module the page imports must exist
 * where its relative path says (there is no bundler to find it), the production image must
 * carry the folder, and the page must read an install's events as the CLI does.
 */

interface PageModel {
  steps: Array<{ name: string; state: string; elapsedSec?: number }>;
  facts: Array<[string, string]>;
  lastId: number;
}
/** The page's own module, as the browser runs it (jest compiles its ES module syntax). */
const { apply, emptyModel, sshLine, SIDE_BY_SIDE } = jest.requireActual<{
  SIDE_BY_SIDE: string[][][];
  apply(model: PageModel, e: StreamEvent, now: number): void;
  emptyModel(): PageModel;
  sshLine(model: PageModel): string | undefined;
}>(path.join(CONSOLE_DIR, 'js', 'progress.js'));

const recording = (name: string): StreamEvent[] =>
  fs
    .readFileSync(path.join(__dirname, '..', 'fixtures', 'cli', name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as StreamEvent);

test("every script, style and module import of the page resolves to a file of the console's folder", () => {
  const missing: string[] = [];
  const visit = (file: string, refs: string[]) => {
    for (const ref of refs) if (!fs.existsSync(path.resolve(path.dirname(file), ref))) missing.push(`${path.relative(CONSOLE_DIR, file)} -> ${ref}`);
  };
  const index = path.join(CONSOLE_DIR, 'index.html');
  const html = fs.readFileSync(index, 'utf8');
  visit(index, [...html.matchAll(/(?:src|href)="([^"#:]+)"/g)].map((m) => m[1]));
  const scripts = fs.readdirSync(path.join(CONSOLE_DIR, 'js')).filter((f) => f.endsWith('.js'));
  expect(scripts.length).toBeGreaterThan(3);
  for (const f of scripts) {
    const file = path.join(CONSOLE_DIR, 'js', f);
    visit(file, [...fs.readFileSync(file, 'utf8').matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]));
  }
  expect(missing).toEqual([]);
  // No inline script or style: the page's Content-Security-Policy allows neither.
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)|<style|\sstyle="|\son\w+="/i);
});

test('the production image ships the console next to dist/, where the API looks for it', () => {
  const dockerfile = fs.readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');
  expect(dockerfile).toMatch(/^COPY --from=build \/src\/console \.\/console$/m);
  expect(path.relative(REPO_ROOT, CONSOLE_DIR)).toBe('console');
});

test.each(['install-events.ndjson', 'install-events-in-turn.ndjson'])("the page's step list reads a recorded install as the CLI does (%s)", (file) => {
  const recorded = recording(file);
  const cli = new ProgressModel();
  const page = emptyModel();
  recorded.forEach((e, i) => {
    cli.apply(e, i);
    apply(page, { ...e, id: i + 1 }, i);
  });
  const view = (steps: Array<{ name: string; state: string; elapsedSec?: number }>) => steps.map((s) => [s.name, s.state, s.elapsedSec]);
  expect(view(page.steps)).toEqual(view(cli.steps));
  expect(page.facts).toEqual(cli.summary.facts);
  expect(page.lastId).toBe(recorded.length);
  const fact = (k: string) => cli.summary.facts.find(([name]) => name === k)![1];
  expect(sshLine(page)).toBe(`ssh ${fact('User')}@${fact('IP')}`);
});

test("the page's copy of the steps that run side by side is the contract's, and a failure beside others stops them as the CLI does", () => {
  expect(SIDE_BY_SIDE).toEqual(sideBySideSteps.map((group) => group.map((branch) => branch.map((s) => s.wire))));
  const events = recording('install-events.ndjson');
  const upToDownload = events.slice(0, events.findIndex((e) => e.step === 'OS preparation > download') + 1);
  const failed: StreamEvent = { step: 'preparation > storage', status: 'error', message: "[-] storage 'local-lvm' does not exist" };
  // The storage check still running beside the download, as the recording has it up to there, fails.
  const running = upToDownload.filter((e) => e.step === 'preparation > storage' && e.status === 'success');
  const stream = [...upToDownload.filter((e) => !running.includes(e)), failed];
  const cli = new ProgressModel();
  const page = emptyModel();
  stream.forEach((e, i) => {
    cli.apply(e, i);
    apply(page, { ...e, id: i + 1 }, i);
  });
  const view = (steps: Array<{ name: string; state: string }>) => steps.map((s) => [s.name, s.state]);
  expect(view(page.steps)).toEqual(view(cli.steps));
  expect(view(cli.steps)).toContainEqual(['preparation > storage', 'failed']);
  expect(view(cli.steps)).toContainEqual(['OS preparation > download', 'stopped']);
});

test("a step's span runs from its first event to its last; an error marks it", () => {
  const at = (seq: number, step: string, status: 'processing' | 'success' | 'error' | 'info', t: number) => ({ seq, step, status, message: '', at: t });
  const events = [at(1, 'a', 'processing', 1000), at(2, 'a', 'success', 1500), at(3, 'b', 'processing', 1600), at(4, 'b', 'error', 4000), { seq: 5, step: 'c', status: 'info' as const, message: '' }];
  expect(stepTimeline(events, true)).toEqual([
    { step: 'a', start: 1000, end: 1500, ms: 500, runs: [{ start: 1000, end: 1500 }], status: 'done' },
    { step: 'b', start: 1600, end: 4000, ms: 2400, runs: [{ start: 1600, end: 4000 }], status: 'error' },
  ]);
  // A step with no `done` line is running while the operation runs, and ended once it closed.
  const running = [at(1, 'a', 'processing', 1000), at(2, 'reboot', 'info', 1200)];
  expect(stepTimeline(running, false).map((s) => s.status)).toEqual(['running', 'running']);
  expect(stepTimeline(running, true).map((s) => s.status)).toEqual(['done', 'done']);
});

test("a step's notes after it ended are not its time, and a step that runs again has two runs", () => {
  const ev = (seq: number, step: string, status: 'processing' | 'success', message: string, at: number) => ({ seq, step, status, message, at });
  const ssh = 'VM initialization > wait for SSH';
  const script = 'VM initialization > init script';
  const events = [
    ev(1, ssh, 'processing', '[*] waiting for SSH on 10.0.0.5', 1000),
    ev(2, ssh, 'success', '[+] waiting for SSH on 10.0.0.5 done (2.00s)', 3000),
    ev(3, ssh, 'processing', '[*] host key SHA256:x (reported by the guest agent)', 3000),
    ev(4, script, 'processing', '[*] running the debian 12 init script', 3100),
    // the guest agent's answer, asked beside the cloud-init wait, lands under the SSH wait
    ev(5, ssh, 'processing', '[*] the guest agent reports 10.0.0.5, as configured', 3400),
    ev(6, script, 'processing', 'Setting up curl ...', 5000),
    ev(7, script, 'success', '[+] running the debian 12 init script done (6.90s)', 10_000),
    ev(8, ssh, 'processing', '[*] waiting for SSH on 10.0.0.5 after reboot', 12_000),
    ev(9, ssh, 'success', '[+] waiting for SSH on 10.0.0.5 after reboot done (3.00s)', 15_000),
  ];
  const [waits, init] = stepTimeline(events, true);
  expect(waits).toEqual({ step: ssh, start: 1000, end: 15_000, ms: 5000, runs: [{ start: 1000, end: 3000 }, { start: 12_000, end: 15_000 }], status: 'done' });
  expect(init).toMatchObject({ ms: 6900, runs: [{ start: 3100, end: 10_000 }] });
  // While the operation runs, a step that has not ended a run yet, or recorded the latest event, is going.
  const running = stepTimeline([...events.slice(0, 6), ev(10, ssh, 'processing', '[*] waiting for SSH on 10.0.0.5 after reboot', 11_000)], false);
  expect(running.find((s) => s.step === ssh)!.runs).toEqual([{ start: 1000, end: 3000 }, { start: 3000, end: 11_000 }]);
  expect(running.find((s) => s.step === script)!.runs).toEqual([{ start: 3100, end: 5000 }]);
  // Once it closed, what the SSH wait noted after its run is not its time.
  expect(stepTimeline(events.slice(0, 7), true)[0].runs).toEqual([{ start: 1000, end: 3000 }]);
});

test('medians per step and source: template installs (a qm clone step) apart from image installs', () => {
  const span = (step: string, ms: number) => ({ step, start: 0, end: ms, ms, runs: [{ start: 0, end: ms }], status: 'done' as const });
  const image = (ms: number) => [span('VM creation > qm create', 100), span('VM initialization > init script', ms)];
  const clone = (ms: number) => [span('VM creation > qm clone', 50), span('VM initialization > init script', ms)];
  expect(stepMedians([image(1000), clone(10), image(3000), image(2000), clone(30)])).toEqual({
    image: { installs: 3, steps: [{ step: 'VM creation > qm create', medianMs: 100, installs: 3 }, { step: 'VM initialization > init script', medianMs: 2000, installs: 3 }] },
    template: { installs: 2, steps: [{ step: 'VM creation > qm clone', medianMs: 50, installs: 2 }, { step: 'VM initialization > init script', medianMs: 20, installs: 2 }] },
  });
});
