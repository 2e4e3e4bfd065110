import { CliError } from './errors';
import { makeCtx, type CtxOutput } from './context';
import { qm } from './qm';
import { pvesh } from './pvesh';
import { pvesm } from './pvesm';
import { pveum } from './pveum';
import { takeFaults } from '../state/faults';
import { nodeOf } from '../state/model';

export const TOOLS = { qm, pvesh, pvesm, pveum } as const;
export type Tool = keyof typeof TOOLS;

/** Asynchronous on purpose: a hanging call must still die on SIGTERM (and be logged). */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One call of `qm`, `pvesh` or `pvesm` on `node` of the cluster in `dir`: applies injected
 * faults, runs the command and returns its exit code. Its output goes to `output`.
 * Undefined: the cluster could not be read (exit 255, and no call log to write to).
 */
export async function runTool(dir: string, node: string, tool: Tool, args: string[], output?: CtxOutput): Promise<number | undefined> {
  let ctx: ReturnType<typeof makeCtx>;
  try {
    ctx = makeCtx(dir, node, output);
  } catch (e) {
    (output?.err ?? ((l: string) => process.stderr.write(l + '\n')))(`sandbox: cannot read the cluster in ${dir}: ${(e as Error).message}`);
    return undefined;
  }
  try {
    if (!nodeOf(ctx.model, node)) throw new CliError(`sandbox: '${node}' is not a node of the cluster in ${dir}`);
    for (const fault of takeFaults(dir, node, [tool, ...args])) {
      if (fault.at !== undefined) {
        (ctx.stepFaults ??= []).push(fault);
        continue;
      }
      await sleep(fault.latencyMs ?? 0);
      if (fault.hangMs !== undefined) {
        await sleep(fault.hangMs);
        throw new CliError(fault.stderr ?? '', fault.exitCode ?? 255);
      }
      if (fault.stderr !== undefined || fault.exitCode !== undefined) {
        throw new CliError(fault.stderr ?? '', fault.exitCode ?? 255);
      }
      for (const w of fault.warn ?? []) ctx.err(`WARN: ${w}`);
    }
    return await TOOLS[tool](ctx, args);
  } catch (e) {
    if (e instanceof CliError) {
      if (e.message) ctx.err(e.message.replace(/\n$/, ''));
      return e.exitCode;
    }
    ctx.err(`sandbox internal error: ${(e as Error).stack ?? e}`);
    return 255;
  }
}
