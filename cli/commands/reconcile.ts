import { Command } from 'commander';
import { readBody } from '../client';
import type { Runner } from '../context';
import { CliError, EXIT } from '../exitCodes';
import { followOperation } from '../operation';
import { printAnswer } from '../output';

/**
 * `POST /api/reconcile`: servers from before it answer 404 for the route itself, which is
 * said as such rather than passed on as "not found", so nobody looks for a missing VM.
 */
export function reconcileCommand(run: Runner): Command {
  return new Command('reconcile')
    .description("compare the cluster with QemuRun's records and clean up what half-finished work left (servers that offer it)")
    .action(
      run(async (ctx) => {
        return followOperation(ctx, (signal) => ctx.client.send('POST', '/api/reconcile', { signal }), {
          plainAnswer: async (res) => {
            if (res.status === 404) {
              throw new CliError('this server has no reconcile endpoint (POST /api/reconcile answered 404): it predates reconcile; nothing was done', EXIT.failed);
            }
            return printAnswer(ctx, { status: res.status, headers: res.headers, body: await readBody(res) });
          },
        });
      }),
    );
}
