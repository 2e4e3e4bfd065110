import type { StreamSink } from '../events';

/** Shows an operation's events as they come: on a terminal, as plain lines, or as NDJSON. */
export interface Renderer extends StreamSink {
  /** The stream is over: `closed` when the server ended it (the operation finished). */
  finish(closed: boolean): void;
  /** A notice outside the event flow (detaching, cancelling), after which more may come. */
  notice(lines: string[]): void;
  /** Stops drawing for good (Ctrl-C), leaving what is on screen. */
  stop(): void;
}
