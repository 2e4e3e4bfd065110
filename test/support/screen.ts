import { Terminal } from '@xterm/headless';

/**
 * The screen a person sees: raw terminal output (escape sequences and all) run through a
 * real terminal emulator, read back as lines of text.
 */
export class Screen {
  readonly term: Terminal;
  /** Every screen the output showed before log-update redrew it (see `feed`). */
  readonly snapshots: string[][] = [];

  /**
   * `convertEol`: output written straight to the emulator, as a pseudo-terminal's line
   * discipline would have turned each \n into \r\n on its way.
   */
  constructor(
    readonly cols = 100,
    readonly rows = 40,
    convertEol = false,
  ) {
    this.term = new Terminal({ cols, rows, scrollback: 1000, allowProposedApi: true, convertEol });
  }

  write(data: string): Promise<void> {
    return new Promise((resolve) => this.term.write(data, resolve));
  }

  /**
   * Writes output as it arrives, keeping a snapshot of the screen just before each redraw
   * erases what was there: a frame that lived a few milliseconds (a bar at 50%) is still a
   * frame somebody saw, though output often arrives in chunks holding several.
   */
  async feed(data: string): Promise<void> {
    for (const piece of splitBeforeRedraws(data)) {
      await this.write(piece);
      this.snapshots.push(this.lines());
    }
  }

  /** All lines, scrollback included, right-trimmed, without the empty ones at the end. */
  lines(): string[] {
    const b = this.term.buffer.active;
    const out: string[] = [];
    for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? '');
    while (out.length > 0 && out[out.length - 1] === '') out.pop();
    return out;
  }

  text(): string {
    return this.lines().join('\n');
  }

  dispose(): void {
    this.term.dispose();
  }
}

const ERASE_LINE = '\x1b[2K';
const CURSOR_UP = '\x1b[1A';

/** Cuts output where a redraw starts: an erase-line that does not continue an erase run. */
export function splitBeforeRedraws(data: string): string[] {
  const pieces: string[] = [];
  let from = 0;
  let at = data.indexOf(ERASE_LINE);
  while (at >= 0) {
    if (at > from && !data.slice(0, at).endsWith(CURSOR_UP)) {
      pieces.push(data.slice(from, at));
      from = at;
    }
    at = data.indexOf(ERASE_LINE, at + ERASE_LINE.length);
  }
  pieces.push(data.slice(from));
  return pieces.filter((p) => p.length > 0);
}
