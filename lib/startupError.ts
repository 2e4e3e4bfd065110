/**
 * A start-up failure the operator can fix: a missing package, a bad setting. The entry
 * point prints its message alone, without a stack trace (the trace is of no use to the
 * reader, the message names the fix), and exits with EXIT_STARTUP instead of the crash
 * status 1, so a supervisor can tell "fix the machine" from "retry".
 */
export const EXIT_STARTUP = 78; // sysexits EX_CONFIG

export class StartupError extends Error {
  override readonly name = 'StartupError';
  readonly exitCode = EXIT_STARTUP;
}
