/** The CLI's exit status, documented in docs/cli.md; scripts branch on it. */
export const EXIT = {
  /** The operation finished well (its last event was not an error), or the call succeeded. */
  ok: 0,
  /** The operation failed (an error event), or the API refused the request. */
  failed: 1,
  /** Bad command line: unknown command or flag, a value of the wrong kind. */
  usage: 2,
  /** The server could not be reached, or the stream was lost and re-attaching failed. */
  unreachable: 3,
  /** Ctrl-C detached from an operation that goes on (128 + SIGINT, as shells report it). */
  detached: 130,
} as const;

/** An error that ends the command with a message and a given exit status. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
