import pc from 'picocolors';
import { ApiError, followEvents } from './events';
import { UnreachableError } from './client';
import type { Context } from './context';
import { CliError, EXIT } from './exitCodes';
import type { Renderer } from './render/renderer';
import { TerminalRenderer } from './render/terminal';
import { JsonRenderer, PlainRenderer } from './render/plain';
import { ProgressModel } from './render/model';

export interface FollowFlags {
  /** Ctrl-C cancels the operation (and waits for its cleanup) instead of detaching. */
  cancelOnInterrupt?: boolean;
}

function rendererFor(ctx: Context): Renderer {
  if (ctx.json) return new JsonRenderer(ctx.stdout, ctx.stderr);
  if (ctx.tty) return new TerminalRenderer(ctx.stdout, 4, pc.createColors(!process.env.NO_COLOR));
  return new PlainRenderer(ctx.stdout, ctx.stderr);
}

/**
 * Follows an operation's events to its end and returns the exit status its last event
 * calls for. Ctrl-C leaves the operation running in Temporal and says how to come back;
 * with `cancelOnInterrupt` it asks the API to cancel and follows the cleanup to its end.
 */
export async function followOperation(
  ctx: Context,
  start: Response | { workflowId: string; after?: number },
  flags: FollowFlags = {},
): Promise<number> {
  const renderer = rendererFor(ctx);
  const model = new ProgressModel();
  let workflowId = start instanceof Response ? (start.headers.get('x-workflow-id') ?? undefined) : start.workflowId;
  const abort = new AbortController();
  let interrupts = 0;

  const onInterrupt = () => {
    interrupts++;
    if (flags.cancelOnInterrupt && interrupts === 1 && workflowId) {
      renderer.notice([pc.yellow(`cancelling workflow ${workflowId} (Ctrl-C again to stop waiting)`)]);
      ctx.client
        .call('POST', `/api/workflows/${encodeURIComponent(workflowId)}/cancel`)
        .then((a) => {
          if (a.status >= 300) renderer.notice([pc.red(`cancel refused (${a.status}): ${messageText(a.body)}`)]);
        })
        .catch((err: unknown) => renderer.notice([pc.red(`cancel failed: ${String(err)}`)]));
      return;
    }
    abort.abort();
  };
  process.on('SIGINT', onInterrupt);
  try {
    const result = await followEvents(
      ctx.client,
      start,
      {
        workflow(id) {
          workflowId = id;
          renderer.workflow?.(id);
        },
        event(e) {
          model.apply(e);
          renderer.event(e);
        },
        reconnecting: (...args) => renderer.reconnecting?.(...args),
      },
      { signal: abort.signal },
    );
    renderer.finish(result.closed);
    const outcome = model.outcome(result.closed);
    return outcome === 'success' ? EXIT.ok : outcome === 'failed' ? EXIT.failed : EXIT.unreachable;
  } catch (err) {
    if (abort.signal.aborted) {
      renderer.stop();
      const again = workflowId ? `qemurun attach ${workflowId}` : undefined;
      const lines = [
        `detached: ${workflowId ? `workflow ${workflowId}` : 'the operation'} goes on`,
        ...(again ? [`re-attach with: ${again}`] : []),
      ];
      if (ctx.json || !ctx.tty) for (const l of lines) ctx.stderr.write(`qemurun: ${l}\n`);
      else ctx.stdout.write(`\n${pc.yellow(lines[0])}\n${lines[1] ? `${pc.bold(lines[1])}\n` : ''}`);
      return EXIT.detached;
    }
    renderer.stop();
    if (err instanceof ApiError) throw new CliError(`${err.status}: ${err.message}`, EXIT.failed);
    if (err instanceof UnreachableError) throw new CliError(err.message, EXIT.unreachable);
    throw err;
  } finally {
    process.off('SIGINT', onInterrupt);
  }
}

function messageText(body: unknown): string {
  return new ApiError(0, body).message;
}
