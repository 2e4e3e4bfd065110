/**
 * An expected reason for the service not to start: a setting, a port, a file or a program
 * the operator can fix. main prints its message (one or two lines naming the cause and the
 * fix) without a stack trace and exits with `exitCode`, so a supervisor tells "fix the
 * setup" apart from a crash (exit status 1), which is worth restarting.
 */
export class StartupError extends Error {
  override name = 'StartupError';
  constructor(
    message: string,
    readonly exitCode: number = EXIT_STARTUP_ERROR,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** sysexits.h EX_CONFIG: the set-up is wrong; restarting will not help. */
export const EXIT_STARTUP_ERROR = 78;
/** What an unexpected error (a bug, a crash) exits with. */
export const EXIT_CRASH = 1;

/** The text of an error for a one-line message: no stack, no "Error: " prefix. */
export function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
