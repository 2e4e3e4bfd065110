import pc from 'picocolors';
import type { ProgressModel, StepView } from './model';

/**
 * The lines a person sees, from the model: pure functions of the model, the time and the
 * terminal's width, so the unit tests draw exactly what the terminal shows.
 */

export type Colors = ReturnType<typeof pc.createColors>;

export interface FrameOptions {
  width: number;
  colors: Colors;
  /** The spinner's current frame. */
  spinner: string;
  now: number;
  /** Output lines shown under a running step. */
  tail: number;
}

const BAR_WIDTH = 30;

/** Cuts a line to the terminal's width, so nothing wraps and the redraw stays in place. */
function fit(text: string, width: number): string {
  const max = Math.max(10, width - 1);
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function seconds(sec: number): string {
  return sec < 60 ? `${sec.toFixed(sec < 10 ? 2 : 1)}s` : `${Math.floor(sec / 60)}m${String(Math.round(sec % 60)).padStart(2, '0')}s`;
}

export function bar(percent: number, width = BAR_WIDTH): string {
  const filled = Math.round((Math.min(100, Math.max(0, percent)) / 100) * width);
  return `${'█'.repeat(filled)}${'░'.repeat(width - filled)} ${percent.toFixed(0).padStart(3)}%`;
}

/** One step's line: a spinner and the time so far while it runs, a mark and its time after (none when it was stopped). */
function stepLine(step: StepView, o: Pick<FrameOptions, 'width' | 'colors' | 'spinner' | 'now'>): string {
  const c = o.colors;
  const time =
    step.state === 'running'
      ? seconds((o.now - step.seenAt) / 1000)
      : step.elapsedSec !== undefined
        ? seconds(step.elapsedSec)
        : '';
  const text = fit(`${step.name}${time ? `  ${time}` : ''}`, o.width - 2);
  const [name, rest] = [text.slice(0, step.name.length), text.slice(step.name.length)];
  if (step.state === 'running') return `${c.cyan(o.spinner)} ${name}${c.dim(rest)}`;
  if (step.state === 'failed') return `${c.red('✖')} ${c.red(name)}${c.dim(rest)}`;
  // Cancelled when a step beside it failed.
  if (step.state === 'stopped') return `${c.yellow('■')} ${c.dim(text)}`;
  return `${c.green('✔')} ${name}${c.dim(rest)}`;
}

/** Lines of command output under a step, dimmed and indented. */
function outputLines(lines: string[], o: Pick<FrameOptions, 'width' | 'colors'>): string[] {
  return lines.map((l) => o.colors.dim(fit(`  │ ${l.replace(/\s+$/, '').replace(/\t/g, '  ')}`, o.width)));
}

/** What is redrawn in place: each running step, its bar, and the tail of its output. */
export function liveLines(model: ProgressModel, o: FrameOptions): string[] {
  const lines: string[] = [];
  for (const step of model.running) {
    lines.push(stepLine(step, o));
    if (step.percent !== undefined) lines.push(`  ${o.colors.cyan(bar(step.percent, Math.min(BAR_WIDTH, o.width - 10)))}`);
    lines.push(...outputLines(step.output.slice(-o.tail), o));
  }
  return lines;
}

/** What stays on screen once a step has ended: its line, and for a failure its last output and error. */
export function endedStepLines(step: StepView, o: Pick<FrameOptions, 'width' | 'colors' | 'spinner' | 'now' | 'tail'>): string[] {
  const lines = [stepLine(step, o)];
  if (step.state === 'failed') {
    lines.push(...outputLines(step.output.slice(-o.tail), o));
    if (step.error) lines.push(o.colors.red(fit(`  ${step.error}`, o.width)));
  }
  for (const d of step.details) lines.push(o.colors.dim(fit(`  · ${d}`, o.width)));
  return lines;
}

/** The closing lines: how it ended, the VM's facts, and how to log in. */
export function summaryLines(model: ProgressModel, closed: boolean, o: Pick<FrameOptions, 'colors'>): string[] {
  const c = o.colors;
  const lines: string[] = [];
  const outcome = model.outcome(closed);
  if (outcome === 'failed') {
    lines.push(c.red(c.bold(`✖ failed at ${model.failure!.step}`)));
  } else if (outcome === 'success') {
    lines.push(c.green(c.bold(`✔ ${model.summary.headline ?? 'done'}`)));
    const facts = model.summary.facts;
    if (facts.length > 0) lines.push(`  ${facts.map(([k, v]) => `${k} ${c.bold(v)}`).join('   ')}`);
    const ip = facts.find(([k]) => k === 'IP')?.[1];
    const user = facts.find(([k]) => k === 'User')?.[1];
    if (ip && user) lines.push(`  ssh ${user}@${ip}`);
  } else {
    lines.push(c.yellow('the event stream ended before the operation did'));
  }
  if (model.workflowId) lines.push(c.dim(`  workflow ${model.workflowId}`));
  return lines;
}
