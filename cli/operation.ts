import pc from 'picocolors';
import { ApiError, followEvents } from './events';
import { UnreachableError, isEventStream, messageOf, readBody } from './client';
import type { Context } from './context';
import { CliError, EXIT } from './exitCodes';
import type { Renderer } from './render/renderer';
import { TerminalRenderer } from './render/terminal';
import { JsonRenderer, PlainRenderer } from './render/plain';
import { ProgressModel } from './render/model';

export interface FollowFlags {
  /** Ctrl-C cancels the operation (and waits for its cleanup) instead of detaching. */
  cancelOnInterrupt?: boolean;
  /** What to do with an answer that is not an event stream (`ok`, a `202`); else it is an error. */
  plainAnswer?: (res: Response) => Promise<number>;
}

/** Sends the request that starts an operation; Ctrl-C while it waits aborts it. */
export type StartRequest = (signal: AbortSignal) => Promise<Response>;

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
  start: StartRequest | { workflowId: string; after?: number },
  flags: FollowFlags = {},
): Promise<number> {
  let workflowId = typeof start === 'function' ? undefined : start.workflowId;
  const abort = new AbortController();
  let interrupts = 0;
  // Made once the stream is there: an answer that is not a stream draws nothing.
  let renderer: Renderer | undefined;

  const onInterrupt = () => {
    interrupts++;
    if (flags.cancelOnInterrupt && interrupts === 1 && workflowId) {
      renderer?.notice([pc.yellow(`cancelling workflow ${workflowId} (Ctrl-C again to stop waiting)`)]);
      ctx.client
        .call('POST', `/api/workflows/${encodeURIComponent(workflowId)}/cancel`)
        .then((a) => {
          if (a.status >= 300) renderer?.notice([pc.red(`cancel refused (${a.status}): ${messageText(a.body)}`)]);
        })
        .catch((err: unknown) => renderer?.notice([pc.red(`cancel failed: ${String(err)}`)]));
      return;
    }
    abort.abort();
  };
  process.on('SIGINT', onInterrupt);
  let first: Response | { workflowId: string; after?: number };
  try {
    first = typeof start === 'function' ? await start(abort.signal) : start;
  } catch (err) {
    process.off('SIGINT', onInterrupt);
    if (!abort.signal.aborted) throw err;
    ctx.stderr.write('qemurun: interrupted before the server answered; the operation may have started: see qemurun list\n');
    return EXIT.detached;
  }
  if (first instanceof Response && !isEventStream(first)) {
    process.off('SIGINT', onInterrupt);
    if (!flags.plainAnswer) throw new CliError(`${first.status}: ${messageOf(await readBody(first))}`, EXIT.failed);
    return flags.plainAnswer(first);
  }
  if (first instanceof Response) workflowId = first.headers.get('x-workflow-id') ?? undefined;
  const view = (renderer = rendererFor(ctx));
  const model = new ProgressModel();
  try {
    const result = await followEvents(
      ctx.client,
      first,
      {
        workflow(id) {
          workflowId = id;
          view.workflow?.(id);
        },
        event(e) {
          model.apply(e);
          view.event(e);
        },
        reconnecting: (...args) => view.reconnecting?.(...args),
      },
      { signal: abort.signal },
    );
    view.finish(result.closed);
    const outcome = model.outcome(result.closed);
    return outcome === 'success' ? EXIT.ok : outcome === 'failed' ? EXIT.failed : EXIT.unreachable;
  } catch (err) {
    if (abort.signal.aborted) {
      view.stop();
      const again = workflowId ? `qemurun attach ${workflowId}` : undefined;
      const lines = [
        `detached: ${workflowId ? `workflow ${workflowId}` : 'the operation'} goes on`,
        ...(again ? [`re-attach with: ${again}`] : []),
      ];
      if (ctx.json || !ctx.tty) for (const l of lines) ctx.stderr.write(`qemurun: ${l}\n`);
      else ctx.stdout.write(`\n${pc.yellow(lines[0])}\n${lines[1] ? `${pc.bold(lines[1])}\n` : ''}`);
      return EXIT.detached;
    }
    view.stop();
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
