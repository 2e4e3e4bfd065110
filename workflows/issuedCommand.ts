import { patched, workflowInfo } from '@temporalio/workflow';
import { failure, type IssuedCommand } from '../contract';

/** The patch from which a VM operation refuses an input not issued for this run. */
export const ISSUED_COMMANDS = 'issued-commands';

/**
 * How long after the API issued it a command may start: the API starts its workflow at
 * once, so five minutes leave room for clock skew between the API's host and Temporal's
 * and for nothing else. A recorded input is useless after it (docs/security.md).
 */
export const INPUT_LIFETIME_MS = 5 * 60_000;

/**
 * Refuses, before any step, an input that was not issued for this run: one without an
 * issue (recorded by an earlier version and started again), one issued for another
 * workflow id (a per-VM command started outside the per-VM lock `vm-<vmid>`), one issued
 * more than INPUT_LIFETIME_MS before this run started (or as far ahead of it), and, when
 * `instance` is required, one that names no VM instance. Compares with workflowInfo() only,
 * so a replay decides the same. Runs recorded before this check skip it (the patch marker
 * is absent from their history), so they replay as they ran.
 */
export function requireIssued(input: IssuedCommand, opts: { instance: 'required' | 'optional' }): void {
  if (!patched(ISSUED_COMMANDS)) return;
  const { workflowId, startTime } = workflowInfo();
  if (input.issuedAt === undefined || input.issuedFor === undefined) {
    throw failure('StaleCommandError', `refusing a command without its issue (issuedAt, issuedFor): start VM operations through the API`);
  }
  if (input.issuedFor !== workflowId) {
    throw failure('StaleCommandError', `refusing a command issued for workflow ${input.issuedFor} under workflow ${workflowId}`);
  }
  const age = startTime.getTime() - input.issuedAt;
  if (Math.abs(age) > INPUT_LIFETIME_MS) {
    const when = new Date(input.issuedAt).toISOString();
    throw failure('StaleCommandError', `refusing a command issued at ${when}: commands expire ${INPUT_LIFETIME_MS / 60_000} minutes after the API issued them`);
  }
  if (opts.instance === 'required' && input.instance === undefined) {
    throw failure('StaleCommandError', 'refusing a command that names no VM instance (instance): start VM operations through the API');
  }
}
