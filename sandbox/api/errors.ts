import { CliError, ParamError } from '../cli/errors';

/**
 * How the REST API fails (PVE::Exception through PVE::HTTPServer): an HTTP status, a
 * message that becomes the status line's reason phrase (its first line) and the body's
 * `message`, and for parameter errors one message per parameter in `errors`.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors?: Record<string, string>,
  ) {
    super(message);
  }
}

/** raise_param_exc */
export const paramExc = (errors: Record<string, string>) => new ApiError(400, 'Parameter verification failed.\n', errors);

/** raise_perm_exc: `Permission check failed (/vms/100, VM.Allocate)`, or without details. */
export const permExc = (what?: string) => new ApiError(403, `Permission check failed${what ? ` (${what})` : ''}\n`);

/**
 * The API's view of an error the shared qm code raised: a parameter error is a 400 with
 * its `errors`; any other `die` is a 500 whose message is the text the CLI prints.
 */
export function fromCli(e: unknown): unknown {
  if (e instanceof ParamError) return paramExc(Object.fromEntries(Object.entries(e.errors).map(([k, v]) => [k, /^invalid format/.test(v) ? `${v}\n` : v])));
  if (e instanceof CliError) {
    const m = /^400 (.*)/.exec(e.message);
    if (m) return new ApiError(400, `${m[1]}\n`);
    return new ApiError(500, `${e.message.replace(/\n$/, '')}\n`);
  }
  return e;
}
