import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import pc from 'picocolors';
import type { StreamEvent } from '../../cli/events';
import { ProgressModel, percentOf } from '../../cli/render/model';
import { bar, liveLines } from '../../cli/render/frame';
import { TerminalRenderer } from '../../cli/render/terminal';
import { JsonRenderer, PlainRenderer } from '../../cli/render/plain';
import { Screen } from '../support/screen';
import { installSteps } from '../../contract/steps';
import { imageInstallStepNames, imageInstallStepNamesInTurn } from '../support/installSteps';

/**
 * The CLI's views of an operation, from a recorded event sequence: a real install's
 * stream (ubuntu 24.04 migrated to pve2, `--reboot always`, on the sandbox), captured with
 * `qemurun --json`; `install-events-in-turn.ndjson` is one from before the preparation ran side by side.
 */

const recorded: StreamEvent[] = fs
  .readFileSync(path.join(__dirname, '..', 'fixtures', 'cli', 'install-events.ndjson'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as StreamEvent);

const STEPS = imageInstallStepNames;

/** The order a side-by-side install's events come in: steps start together and end as each finishes. */
const S = installSteps;
const ev = (step: { wire: string }, status: StreamEvent['status'], message: string): Omit<StreamEvent, 'id'> => ({ step: step.wire, status, message });
const interleaved: StreamEvent[] = [
  ev(S.workflow, 'info', '[*] workflow id: install-side'),
  ev(S.storage, 'processing', '[*] checking storage pool'),
  ev(S.cpuBaseline, 'processing', '[*] detecting cluster CPU baseline'),
  ev(S.serviceKey, 'processing', '[*] reading the main node SSH key'),
  ev(S.cpuBaseline, 'success', '[+] detecting cluster CPU baseline done (0.05s)'),
  ev(S.download, 'processing', '[*] fetching debian 12 cloud image'),
  ev(S.download, 'processing', '[*] downloading: 40%'),
  ev(S.storage, 'success', '[+] checking storage pool done (0.10s)'),
  ev(S.serviceKey, 'success', '[+] reading the main node SSH key done (0.11s)'),
  ev(S.download, 'processing', '[*] downloading: 100%'),
  ev(S.download, 'success', '[+] fetching debian 12 cloud image done (0.30s)'),
  ev(S.stageImage, 'processing', '[*] placing the image on the main node'),
  ev(S.stageImage, 'success', '[+] placing the image on the main node done (0.01s)'),
  ev(S.createVm, 'processing', '[*] creating VM'),
  ev(S.createVm, 'success', '[+] creating VM done (0.20s)'),
  ev(S.createVm, 'processing', '[*] VMID 120, IP 10.0.0.120, name web-120'),
  ev(S.waitForSsh, 'processing', '[*] waiting for SSH on 10.0.0.120'),
  ev(S.waitForSsh, 'success', '[+] waiting for SSH on 10.0.0.120 done (1.00s)'),
  ev(S.waitForSsh, 'processing', '[*] host key SHA256:abc (reported by the guest agent)'),
  ev(S.initScript, 'processing', '[*] running the debian 12 init script'),
  ev(S.waitForSsh, 'processing', '[*] the guest agent reports 10.0.0.120, as configured'),
  ev(S.initScript, 'processing', 'setting the timezone'),
  ev(S.initScript, 'success', '[+] running the debian 12 init script done (2.00s)'),
  ev(S.reboot, 'processing', '[*] no reboot needed: nothing new'),
  ev(S.finalizing, 'success', '[+] VM installation completed in 4.00s'),
  ev(S.finalizing, 'success', '[*] VMID: 120'),
  ev(S.finalizing, 'success', '[*] IP: 10.0.0.120'),
  ev(S.finalizing, 'success', '[*] User: debian'),
].map((e, i) => ({ ...e, id: i + 1 }));

const upTo = (pred: (e: StreamEvent) => boolean) => recorded.slice(0, recorded.findIndex(pred) + 1);
const plain = pc.createColors(false);

/** A terminal as log-update sees one: a TTY of 100 columns whose output goes to a real emulator. */
function fakeTty(screen: Screen): NodeJS.WriteStream & PassThrough {
  const out = new PassThrough() as unknown as NodeJS.WriteStream & PassThrough;
  Object.assign(out, { isTTY: true, columns: screen.cols, rows: screen.rows });
  return out;
}

async function drawn(screen: Screen, out: NodeJS.WriteStream & PassThrough): Promise<void> {
  const chunks: string[] = [];
  for (let c = out.read() as Buffer | null; c; c = out.read() as Buffer | null) chunks.push(c.toString());
  await screen.feed(chunks.join(''));
}

describe('the progress model', () => {
  it('reads the recorded install as its steps, in order, each with the time the server gave', () => {
    const model = new ProgressModel();
    for (const e of recorded) model.apply(e);
    expect(model.steps.map((s) => s.name)).toEqual(STEPS);
    expect(model.steps.every((s) => s.state === 'done')).toBe(true);
    const importDone = recorded.find((e) => e.step === 'VM creation > import disk' && e.status === 'success')!;
    expect(model.steps[6].elapsedSec).toBe(Number(/\(([\d.]+)s\)$/.exec(importDone.message)![1]));
    expect(model.steps[5].details).toEqual([expect.stringMatching(/^VMID \d+, IP [\d.]+, name rec-\d+$/)]);
    expect(model.workflowId).toMatch(/^install-/);
    expect(model.summary.headline).toMatch(/^VM installation completed in [\d.]+s$/);
    expect(model.summary.facts.map(([k]) => k)).toEqual(['VMID', 'IP', 'User']);
    expect(model.outcome(true)).toBe('success');
  });

  it('reads an install recorded before the preparation ran side by side as it always did', () => {
    const inTurn = fs
      .readFileSync(path.join(__dirname, '..', 'fixtures', 'cli', 'install-events-in-turn.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as StreamEvent);
    const model = new ProgressModel();
    for (const e of inTurn) model.apply(e);
    expect(model.steps.map((s) => s.name)).toEqual(imageInstallStepNamesInTurn);
    expect(model.steps.every((s) => s.state === 'done' && s.elapsedSec !== undefined)).toBe(true);
    expect(model.outcome(true)).toBe('success');
  });

  it('reads steps that run side by side each under its own name, ended by its own `done`', () => {
    const model = new ProgressModel();
    for (const e of interleaved.slice(0, 7)) model.apply(e);
    expect(model.running.map((s) => s.name)).toEqual([S.storage.wire, S.serviceKey.wire, S.download.wire]);
    expect(model.running[2].percent).toBe(40);
    for (const e of interleaved.slice(7)) model.apply(e);
    expect(model.steps.map((s) => [s.name, s.state, s.elapsedSec])).toEqual([
      [S.storage.wire, 'done', 0.1],
      [S.cpuBaseline.wire, 'done', 0.05],
      [S.serviceKey.wire, 'done', 0.11],
      [S.download.wire, 'done', 0.3],
      [S.stageImage.wire, 'done', 0.01],
      [S.createVm.wire, 'done', 0.2],
      [S.waitForSsh.wire, 'done', 1],
      [S.initScript.wire, 'done', 2],
      [S.reboot.wire, 'done', undefined],
    ]);
    // The address check's line, which came while the init script ran, is the SSH wait's.
    expect(model.steps[6].details).toEqual(['host key SHA256:abc (reported by the guest agent)', 'the guest agent reports 10.0.0.120, as configured']);
    expect(model.steps[7].output).toEqual(['setting the timezone']);
    expect(model.outcome(true)).toBe('success');
  });

  it('marks the steps beside a failed one stopped, not done', () => {
    const model = new ProgressModel();
    for (const e of interleaved.slice(0, 7)) model.apply(e);
    model.apply({ id: 8, step: S.storage.wire, status: 'error', message: "[-] storage 'local-lvm' does not exist" });
    expect(model.steps.map((s) => [s.name, s.state])).toEqual([
      [S.storage.wire, 'failed'],
      [S.cpuBaseline.wire, 'done'],
      [S.serviceKey.wire, 'stopped'],
      [S.download.wire, 'stopped'],
    ]);
    expect(model.failure?.step).toBe(S.storage.wire);
  });

  it('keeps a percentage for the step that reports one, and no percentage lines in its output', () => {
    const model = new ProgressModel();
    for (const e of upTo((e) => /\(50\.\d+%\)/.test(e.message))) model.apply(e);
    const running = model.running;
    expect(running.map((s) => s.name)).toEqual(['VM creation > import disk']);
    expect(running[0].percent).toBeCloseTo(50.02);
    expect(running[0].output.some((l) => l.includes('%'))).toBe(false);
    const live = liveLines(model, { width: 100, colors: plain, spinner: '⠋', now: Date.now(), tail: 4 });
    expect(live[1]).toBe(`  ${bar(50.02)}`);
    expect(live[1]).toMatch(/█+░+ +50%$/);
  });

  it("tails the init script's last output lines beneath its step while it runs", () => {
    const model = new ProgressModel();
    for (const e of upTo((e) => e.message.includes('init script finished'))) model.apply(e);
    const live = liveLines(model, { width: 100, colors: plain, spinner: '⠋', now: Date.now(), tail: 4 });
    expect(live[0]).toMatch(/^⠋ VM initialization > init script {2}\d/);
    expect(live.slice(1)).toEqual([
      '  │ tuning sysctl (/etc/sysctl.d/90-qemurun.conf)',
      '  │ adding a 2G swap file',
      '  │ enabling qemu-guest-agent',
      expect.stringMatching(/^ {2}│ \[\+\] init script finished in \d+s$/),
    ]);
  });

  it('ends in failure on an error event, keeping the failed step, its output and the error', () => {
    const model = new ProgressModel();
    const events: StreamEvent[] = [
      { id: 1, step: 'preparation > workflow', status: 'info', message: '[*] workflow id: install-x' },
      { id: 2, step: 'VM initialization > init script', status: 'processing', message: '[*] running the debian 12 init script' },
      { id: 3, step: 'VM initialization > init script', status: 'processing', message: 'E: Unable to locate package nope' },
      { id: 4, step: 'VM initialization > init script', status: 'processing', message: '[*] removing VM 120' },
      { id: 5, step: 'VM initialization > init script', status: 'error', message: '[-] init script exited with status 100' },
    ];
    for (const e of events) model.apply(e);
    expect(model.outcome(true)).toBe('failed');
    expect(model.steps).toEqual([
      expect.objectContaining({ name: 'VM initialization > init script', state: 'failed', error: 'init script exited with status 100', output: ['E: Unable to locate package nope', 'removing VM 120'] }),
    ]);
  });

  it('finds the percentage of download, copy, import and block-job lines, and only those', () => {
    expect(percentOf('[*] downloading: 45%')).toBe(45);
    expect(percentOf('[*] copying the image to pve1: 60%')).toBe(60);
    expect(percentOf('transferred 1.2 GiB of 2.0 GiB (61.02%)')).toBe(61.02);
    expect(percentOf('mirror-scsi0: transferred 10.0 MiB of 32.0 GiB (0.03%) in 1s')).toBe(0.03);
    expect(percentOf('[*] downloading: 123456 bytes')).toBeUndefined();
    expect(percentOf('vm.swappiness=10')).toBeUndefined();
  });
});

describe('the terminal view', () => {
  it('shows a spinner and a bar while the import runs, then one line per step and the summary', async () => {
    const screen = new Screen(100, 40, true);
    const out = fakeTty(screen);
    const view = new TerminalRenderer(out, 4, plain);
    const half = recorded.findIndex((e) => /\(50\.\d+%\)/.test(e.message));
    for (const e of recorded.slice(0, half + 1)) view.event(e);
    await drawn(screen, out);
    const mid = screen.lines();
    expect(mid.slice(-4)).toEqual([
      expect.stringMatching(/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] VM creation > import disk {2}[\d.]+s$/),
      expect.stringMatching(/^ {2}█{15}░{15} {2}50%$/),
      expect.stringMatching(/^ {2}│ importing disk '\/var\/lib\/qemurun\/images\/ubuntu-24\.04\/.*…$/),
      // qm importdisk's next line (the sandbox's storage says what it allocated).
      expect.stringMatching(/^ {2}│ +Logical volume "vm-\d+-disk-0" created\.$/),
    ]);
    expect(mid.every((l) => l.length < 100)).toBe(true);

    for (const e of recorded.slice(half + 1)) view.event(e);
    view.finish(true);
    await drawn(screen, out);
    const lines = screen.lines();
    expect(lines[0]).toMatch(/^workflow install-/);
    const stepLines = lines.filter((l) => l.startsWith('✔ ') && !l.includes('completed'));
    expect(stepLines.map((l) => l.replace(/ {2}[\d.]+s$/, '').slice(2))).toEqual(STEPS);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}· VMID \d+, IP [\d.]+, name rec-\d+$/));
    expect(lines.slice(-4)).toEqual([
      expect.stringMatching(/^✔ VM installation completed in [\d.]+s$/),
      expect.stringMatching(/^ {2}VMID \d+ {3}IP [\d.]+ {3}User ubuntu$/),
      expect.stringMatching(/^ {2}ssh ubuntu@[\d.]+$/),
      expect.stringMatching(/^ {2}workflow install-/),
    ]);
    // Nothing of the redrawn region is left behind: no spinner, bar or output line.
    expect(lines.some((l) => /[█│⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/.test(l))).toBe(false);
    screen.dispose();
  });

  it('keeps a failed step on screen with its last output and the error, and says where it failed', async () => {
    const screen = new Screen(100, 40, true);
    const out = fakeTty(screen);
    const view = new TerminalRenderer(out, 4, plain);
    view.event({ id: 1, step: 'VM initialization > init script', status: 'processing', message: '[*] running the debian 12 init script' });
    view.event({ id: 2, step: 'VM initialization > init script', status: 'processing', message: 'E: Unable to locate package nope' });
    view.event({ id: 3, step: 'VM initialization > init script', status: 'error', message: '[-] init script exited with status 100' });
    view.finish(true);
    await drawn(screen, out);
    expect(screen.lines()).toEqual([
      '✖ VM initialization > init script',
      '  │ E: Unable to locate package nope',
      '  init script exited with status 100',
      '✖ failed at VM initialization > init script',
    ]);
    screen.dispose();
  });
  it('prints steps run side by side one line each, in the order they started, once each has ended', async () => {
    const screen = new Screen(100, 40, true);
    const out = fakeTty(screen);
    const view = new TerminalRenderer(out, 4, plain);
    for (const e of interleaved.slice(0, 7)) view.event(e);
    await drawn(screen, out);
    // Storage still runs: the CPU baseline, done, waits under it; the three running ones are live.
    expect(screen.lines().filter((l) => !l.startsWith('workflow'))).toEqual([
      expect.stringMatching(new RegExp(`^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ${S.storage.wire} {2}[\\d.]+s$`)),
      expect.stringMatching(new RegExp(`^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ${S.serviceKey.wire} {2}[\\d.]+s$`)),
      expect.stringMatching(new RegExp(`^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ${S.download.wire} {2}[\\d.]+s$`)),
      expect.stringMatching(/^ {2}█{12}░{18} {2}40%$/),
    ]);
    for (const e of interleaved.slice(7)) view.event(e);
    view.finish(true);
    await drawn(screen, out);
    const lines = screen.lines();
    expect(lines.filter((l) => l.startsWith('✔ ') && !l.includes('completed')).map((l) => l.replace(/ {2}[\d.]+s$/, '').slice(2))).toEqual([
      S.storage, S.cpuBaseline, S.serviceKey, S.download, S.stageImage, S.createVm, S.waitForSsh, S.initScript, S.reboot,
    ].map((s) => s.wire));
    const ssh = lines.findIndex((l) => l.startsWith(`✔ ${S.waitForSsh.wire}`));
    expect(lines.slice(ssh + 1, ssh + 3)).toEqual(['  · host key SHA256:abc (reported by the guest agent)', '  · the guest agent reports 10.0.0.120, as configured']);
    screen.dispose();
  });

  it('shows the steps beside a failed one as stopped', async () => {
    const screen = new Screen(100, 40, true);
    const out = fakeTty(screen);
    const view = new TerminalRenderer(out, 4, plain);
    for (const e of interleaved.slice(1, 7)) view.event(e);
    view.event({ id: 8, step: S.storage.wire, status: 'error', message: "[-] storage 'local-lvm' does not exist" });
    view.finish(true);
    await drawn(screen, out);
    expect(screen.lines()).toEqual([
      `✖ ${S.storage.wire}`,
      "  storage 'local-lvm' does not exist",
      `✔ ${S.cpuBaseline.wire}  0.05s`,
      `■ ${S.serviceKey.wire}`,
      `■ ${S.download.wire}`,
      `✖ failed at ${S.storage.wire}`,
    ]);
    screen.dispose();
  });

  it("keeps a step's decision on screen when the step ends without running anything (no reboot needed)", async () => {
    const screen = new Screen(100, 40, true);
    const out = fakeTty(screen);
    const view = new TerminalRenderer(out, 4, plain);
    const reboot = installSteps.reboot.wire;
    const finalizing = installSteps.finalizing.wire;
    view.event({ id: 1, step: reboot, status: 'processing', message: '[*] no reboot needed: no package asks for one, and kernel 6.1.0-40-amd64 is running' });
    view.event({ id: 2, step: finalizing, status: 'success', message: '[+] VM installation completed in 30.00s' });
    view.finish(true);
    await drawn(screen, out);
    expect(screen.lines().slice(0, 2)).toEqual([
      `✔ ${reboot}`,
      '  · no reboot needed: no package asks for one, and kernel 6.1.0-40-amd64 is running',
    ]);
    screen.dispose();
  });
});

describe('off a terminal', () => {
  const sink = () => {
    const chunks: string[] = [];
    return { stream: { write: (s: string) => chunks.push(s) } as unknown as NodeJS.WritableStream, text: () => chunks.join('') };
  };

  it('prints one plain line per event', () => {
    const out = sink();
    const err = sink();
    const view = new PlainRenderer(out.stream, err.stream);
    for (const e of recorded) view.event(e);
    view.finish(true);
    const lines = out.text().trimEnd().split('\n');
    expect(lines).toHaveLength(recorded.length);
    expect(lines[2]).toBe(`${recorded[2].step}: ${recorded[2].message}`);
    expect(lines.some((l) => l.includes('\x1b'))).toBe(false);
    expect(err.text()).toBe('');
  });

  it('--json prints the events as NDJSON, exactly as they came', () => {
    const out = sink();
    const view = new JsonRenderer(out.stream, sink().stream);
    for (const e of recorded) view.event(e);
    const back = out.text().trimEnd().split('\n').map((l) => JSON.parse(l) as StreamEvent);
    expect(back).toEqual(recorded);
  });
});

describe('a rebuild', () => {
  it('keeps its own workflow id and summary, not those of the install it relays', () => {
    const model = new ProgressModel();
    model.apply({ id: 1, step: 'VM rebuild > workflow', status: 'info', message: '[*] workflow id: vm-120' });
    for (const e of recorded) model.apply(e);
    for (const [i, message] of ['[+] VM rebuild completed in 20.00s', '[*] VMID: 120', '[*] IP: 10.0.0.120', '[*] User: ubuntu'].entries()) {
      model.apply({ id: 500 + i, step: 'VM rebuild > finalizing', status: 'success', message });
    }
    expect(model.workflowId).toBe('vm-120');
    expect(model.summary).toEqual({
      headline: 'VM rebuild completed in 20.00s',
      facts: [
        ['VMID', '120'],
        ['IP', '10.0.0.120'],
        ['User', 'ubuntu'],
      ],
    });
  });
});
