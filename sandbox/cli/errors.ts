/**
 * How the real tools fail. A CliError is a `die` in Perl: its message goes to stderr as
 * is, and the exit code is 255 unless said otherwise (qm.pm's $upid_exit uses -1 too).
 */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 255) {
    super(message);
  }
}

/**
 * PVE's raise_param_exc: the CLI prints it as `400 Parameter verification failed.` + one
 * `param: message` line each + the usage line; the REST API answers the `errors` object.
 */
export class ParamError extends CliError {
  constructor(readonly errors: Record<string, string>, usage: string) {
    const lines = Object.keys(errors)
      .sort()
      .map((k) => `${k}: ${errors[k]}`);
    super(['400 Parameter verification failed.', ...lines, usage].join('\n'));
  }
}

export function paramError(errors: Record<string, string>, usage: string): CliError {
  return new ParamError(errors, usage);
}

/** Other HTTP-400 exceptions raised while parsing the command line. */
export function usageError(message: string, usage: string): CliError {
  return new CliError(`400 ${message}\n${usage}`);
}
