import type { Client } from '@temporalio/client';
import { activitySeconds, activitySpans, type ActivitySpan } from './history';
import { installBatch, type InstallRun } from './installs';
import type { Report } from './report';
import { watch } from './sseClient';

/**
 * `npm run bench -- --templates [--real-guests]`: how long a Debian 12 template
 * takes to build (`POST /api/templates`, to the final `[+] template` event of its stream),
 * then `count` installs with `"source": "image"` and `count` with `"source": "template"`,
 * the same body otherwise, side by side. The installs run one at a time, alternating
 * image and template, so that what else loads the machine weighs on both alike; each is
 * timed from its POST to the end of its stream, as the install figures above are.
 */

const OS = 'debian';
const VERSION = '12';

export interface TemplateBuild {
  workflowId: string;
  ok: boolean;
  seconds: number;
  /** The final `[+] template ...` line, or what went wrong. */
  outcome: string;
}

/** Starts a template build and follows its stream (`events`, as the 202 names it) to the end. */
export async function buildTemplate(url: string, timeoutMs: number): Promise<TemplateBuild> {
  const t0 = Date.now();
  const res = await fetch(`${url}/api/templates`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ os: OS, version: VERSION }),
  });
  const text = await res.text();
  if (res.status !== 202) return { workflowId: '', ok: false, seconds: (Date.now() - t0) / 1000, outcome: `POST /api/templates answered ${res.status}: ${text.slice(0, 200)}` };
  const { workflowId, events } = JSON.parse(text) as { workflowId: string; events: string };
  const stream = await watch(`${url}${events}`, { timeoutMs });
  const seconds = (Date.now() - t0) / 1000;
  const errors = stream.arrivals.filter((e) => e.status === 'error').map((e) => e.message);
  const final = stream.arrivals.map((e) => e.message).filter((m) => m.startsWith('[+] template')).at(-1);
  const ok = stream.closed && errors.length === 0 && final !== undefined;
  return { workflowId, ok, seconds, outcome: final ?? errors[0] ?? `stream ended without a [+] template event (status ${stream.status})` };
}

/** The path an install took, as its `preparation > template` event tells (workflows/install.ts). */
export function pathOf(run: InstallRun): 'template' | 'image' {
  return run.messages.some((m) => /installing as a (linked|full) clone of template /.test(m)) ? 'template' : 'image';
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(seconds: number[]): Spread {
  const sorted = [...seconds].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted.at(-1)! };
}

/** `ratio` is image ÷ template (medians): how many times faster the template install is. */
export function ratioOf(image: Spread, template: Spread): number {
  return image.median / template.median;
}

export async function benchTemplates(opts: {
  url: string;
  client: Client;
  report: Report;
  /** `process guests` or `real guests`: the table's label. */
  guests: string;
  count: number;
  /** The least image ÷ template ratio asked for, when there is a target. */
  targetRatio?: number;
  timeoutMs: number;
}): Promise<void> {
  const { report, guests, count } = opts;
  const digits = guests === 'real guests' ? 0 : 1;
  const s = (n: number) => `${n.toFixed(digits)} s`;

  console.log(`${guests}: building the ${OS} ${VERSION} template ...`);
  const build = await buildTemplate(opts.url, opts.timeoutMs);
  report.add(`${guests}: template build, ${OS} ${VERSION}`, '—', '—', `${s(build.seconds)}${build.ok ? '' : ` (FAILED: ${build.outcome})`}`);
  if (!build.ok) return;

  const runs: Record<'image' | 'template', InstallRun[]> = { image: [], template: [] };
  const parts: Record<'image' | 'template', Array<Record<Part, number>>> = { image: [], template: [] };
  for (let i = 0; i < count; i++) {
    for (const source of ['image', 'template'] as const) {
      console.log(`${guests}: install ${i + 1}/${count} with "source": "${source}" ...`);
      const batch = await installBatch({ url: opts.url, client: opts.client, count: 1, osIndex: 0, body: { source }, timeoutMs: opts.timeoutMs });
      const run = batch.runs[0];
      runs[source].push(run);
      if (run.ok) parts[source].push(partsOf(await activitySpans(opts.client, run.workflowId).catch(() => [])));
    }
  }

  const figures = {} as Record<'image' | 'template', Spread>;
  for (const source of ['image', 'template'] as const) {
    const all = runs[source];
    const ok = all.filter((r) => r.ok);
    const failed = all.length - ok.length;
    // An install that took the other path measures the other path: say so beside the figure.
    const otherPath = ok.filter((r) => pathOf(r) !== source).length;
    const notes = [failed ? `${failed} FAILED` : '', otherPath ? `${otherPath} took the ${source === 'image' ? 'template' : 'image'} path` : ''].filter(Boolean);
    if (ok.length === 0) {
      report.add(`${guests}: install by ${source}, ${OS} ${VERSION} (${all.length})`, '—', '—', `no install succeeded${notes.length ? ` (${notes.join(', ')})` : ''}`);
      continue;
    }
    figures[source] = spread(ok.map((r) => r.seconds));
    const f = figures[source];
    report.add(
      `${guests}: install by ${source}, ${OS} ${VERSION} (${ok.length} of ${all.length})`,
      '—',
      '—',
      `median ${s(f.median)}, min ${s(f.min)}, max ${s(f.max)}${notes.length ? ` (${notes.join(', ')})` : ''}`,
    );
  }
  if (!figures.image || !figures.template) return;
  const ratio = ratioOf(figures.image, figures.template);
  report.add(
    `${guests}: image ÷ template, medians`,
    opts.targetRatio ? `≥ ${opts.targetRatio}×` : '—',
    '—',
    `${ratio.toFixed(1)}× (${s(figures.image.median)} / ${s(figures.template.median)})`,
    opts.targetRatio ? ratio >= opts.targetRatio : undefined,
  );
  for (const part of PARTS) {
    const of = (source: 'image' | 'template') => (parts[source].length ? `${s(spread(parts[source].map((p) => p[part])).median)}` : '—');
    report.add(`  ${part}, image / template (medians)`, '—', '—', `${of('image')} / ${of('template')}`);
  }
  // A clone still boots once: the image install divided by the clone's boot alone is the
  // most any template path could reach on these guests.
  if (parts.template.length) {
    const boot = spread(parts.template.map((p) => p['boot to SSH'])).median;
    report.add(`${guests}: image ÷ the clone's boot to SSH alone (bound)`, '—', '—', `${(figures.image.median / boot).toFixed(1)}×`);
  }
}

// An install waits for cloud-init inside runInitScript (one activity for the step); a run
// recorded before, and a template build, in waitForCloudInit: the two parts are one here.
const PARTS = ['boot to SSH', 'cloud-init and init script', 'reboot to SSH'] as const;
type Part = (typeof PARTS)[number];

/** Where an install's time went, by the activities of its history (seconds). */
function partsOf(spans: ActivitySpan[]): Record<Part, number> {
  const total = (name: string, nth?: number) => activitySeconds(spans, name, nth);
  return {
    'boot to SSH': total('startVm') + total('waitForSsh', 0),
    'cloud-init and init script': total('waitForCloudInit') + total('runInitScript'),
    'reboot to SSH': total('rebootVm') + total('waitForSsh', 1),
  };
}
