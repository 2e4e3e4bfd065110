import type { StreamEvent } from '../events';
import type { Renderer } from './renderer';

/**
 * Off a terminal (a pipe, a CI log): one line per event, `<step>: <message>`, nothing
 * redrawn. Notices go to stderr so stdout stays the operation's own lines.
 */
export class PlainRenderer implements Renderer {
  protected failed = false;

  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly err: NodeJS.WritableStream,
  ) {}

  event(e: StreamEvent): void {
    if (e.status === 'error') this.failed = true;
    this.out.write(`${e.step}: ${e.message}\n`);
  }

  reconnecting(attempt: number, lastEventId: number, why: string): void {
    this.err.write(`qemurun: ${why}; re-attaching after event ${lastEventId} (attempt ${attempt})\n`);
  }

  notice(lines: string[]): void {
    for (const l of lines) this.err.write(`qemurun: ${l.trim()}\n`);
  }

  finish(closed: boolean): void {
    if (!closed && !this.failed) this.err.write('qemurun: the event stream ended before the operation did\n');
  }

  stop(): void {}
}

/** `--json`: the events as NDJSON, one object per line, exactly as the API sent them. */
export class JsonRenderer extends PlainRenderer {
  constructor(
    private readonly stdout: NodeJS.WritableStream,
    stderr: NodeJS.WritableStream,
  ) {
    super(stdout, stderr);
  }

  override event(e: StreamEvent): void {
    if (e.status === 'error') this.failed = true;
    this.stdout.write(`${JSON.stringify({ id: e.id, step: e.step, status: e.status, message: e.message })}\n`);
  }
}
