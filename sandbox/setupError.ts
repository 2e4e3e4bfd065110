/**
 * Something on this machine keeps the sandbox from starting that its operator can fix: a
 * missing program, a port, an image that did not build. The message is one or two lines
 * naming the cause and the fix. The service's loader (app/sandbox.ts) reports it as a
 * set-up error of its own (no stack trace, exit status 78); the standalone sandbox does
 * the same.
 */
export class SandboxSetupError extends Error {
  override name = 'SandboxSetupError';
}

