import { createLogUpdate } from 'log-update';
import pc from 'picocolors';
import spinners from 'cli-spinners';
import type { StreamEvent } from '../events';
import { ProgressModel, type StepView } from './model';
import { endedStepLines, liveLines, summaryLines, type FrameOptions } from './frame';
import type { Renderer } from './renderer';

const SPINNER = spinners.dots;

/**
 * The view on a terminal: a step's line is redrawn in place with a spinner, its elapsed
 * time, a progress bar and the tail of its output while it runs (log-update), and written
 * once for good when it ends, so the scrollback keeps one line per step however long the
 * install.
 */
export class TerminalRenderer implements Renderer {
  readonly model = new ProgressModel();
  private readonly live;
  private readonly timer: NodeJS.Timeout;
  private frame = 0;
  private printedSteps = 0;
  private readonly printedDetails = new Map<StepView, number>();
  private headerShown = false;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly tail = 4,
    private readonly colors = pc.createColors(true),
  ) {
    this.live = createLogUpdate(out, { showCursor: false });
    this.timer = setInterval(() => {
      this.frame++;
      this.draw();
    }, SPINNER.interval);
    this.timer.unref();
  }

  workflow(id: string): void {
    this.model.workflowId ??= id;
    this.header();
  }

  event(e: StreamEvent): void {
    this.model.apply(e);
    this.header();
    this.printEnded();
    this.draw();
  }

  reconnecting(attempt: number, lastEventId: number, why: string): void {
    this.permanent([this.colors.yellow(`  ${why}; re-attaching after event ${lastEventId} (attempt ${attempt})`)]);
    this.draw();
  }

  notice(lines: string[]): void {
    this.permanent(lines);
    this.draw();
  }

  finish(closed: boolean): void {
    clearInterval(this.timer);
    if (closed) for (const s of this.model.running) s.state = 'done';
    this.printEnded();
    this.live.clear();
    this.out.write(`${summaryLines(this.model, closed, { colors: this.colors }).join('\n')}\n`);
    this.live.done();
  }

  stop(): void {
    clearInterval(this.timer);
    this.draw();
    this.live.done();
  }

  private options(): FrameOptions {
    return {
      width: this.out.columns || 80,
      colors: this.colors,
      spinner: SPINNER.frames[this.frame % SPINNER.frames.length],
      now: Date.now(),
      tail: this.tail,
    };
  }

  private header(): void {
    if (this.headerShown || !this.model.workflowId) return;
    this.headerShown = true;
    this.permanent([this.colors.dim(`workflow ${this.model.workflowId}`)]);
  }

  /** Steps that have ended since the last call, and notices that came after a step ended. */
  private printEnded(): void {
    const lines: string[] = [];
    const o = this.options();
    for (const [step, shown] of this.printedDetails) {
      for (const d of step.details.slice(shown)) lines.push(this.colors.dim(`  · ${d}`));
      this.printedDetails.set(step, step.details.length);
    }
    const steps = this.model.steps;
    while (this.printedSteps < steps.length && steps[this.printedSteps].state !== 'running') {
      const step = steps[this.printedSteps++];
      lines.push(...endedStepLines(step, o));
      this.printedDetails.set(step, step.details.length);
    }
    if (lines.length > 0) this.permanent(lines);
  }

  private permanent(lines: string[]): void {
    this.live.clear();
    this.out.write(`${lines.join('\n')}\n`);
  }

  private draw(): void {
    this.live(liveLines(this.model, this.options()).join('\n'));
  }
}
