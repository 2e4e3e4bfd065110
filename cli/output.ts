import type { ApiAnswer } from './client';
import { messageOf } from './client';
import type { Context } from './context';
import { CliError, EXIT } from './exitCodes';

/**
 * Prints a plain answer of the API: with `--json` the body as one JSON line, on a person's
 * screen the text, or the JSON indented. A refusal (4xx, 5xx) becomes the exit status 1
 * with the API's own message.
 */
export function printAnswer(ctx: Context, answer: ApiAnswer, human?: (body: any) => string): number {
  if (answer.status >= 300) throw refusal(answer);
  const { body } = answer;
  if (ctx.json) ctx.stdout.write(`${JSON.stringify(body)}\n`);
  else if (human) ctx.stdout.write(`${human(body)}\n`);
  else ctx.stdout.write(`${typeof body === 'string' ? body.trim() : JSON.stringify(body, null, 2)}\n`);
  return EXIT.ok;
}

function refusal(answer: ApiAnswer): CliError {
  return new CliError(`${answer.status}: ${messageOf(answer.body)}`, EXIT.failed);
}

/** Left-aligned columns, as `qm list` prints them. */
export function table(header: string[], rows: Array<Array<string | number | boolean | null | undefined>>): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n');
}
