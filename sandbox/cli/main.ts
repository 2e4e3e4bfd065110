import { CliError } from './errors';
import { makeCtx } from './context';
import { qm } from './qm';
import { pvesh } from './pvesh';
import { pvesm } from './pvesm';
import { takeFaults } from '../state/faults';
import { appendCall } from '../state/callLog';
import { nodeOf } from '../state/model';

/**
 * Entry point of the sandbox's `qm`, `pvesh` and `pvesm` (sandbox/bin/*): finds the
 * cluster and node from the environment, applies injected faults, runs the command and
 * appends the call to the cluster's call log.
 */
const TOOLS = { qm, pvesh, pvesm } as const;

/** Asynchronous on purpose: a hanging call must still die on SIGTERM (and be logged). */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<number> {
  const [tool, ...args] = process.argv.slice(2) as [keyof typeof TOOLS, ...string[]];
  const dir = process.env.PVE_SANDBOX_DIR;
  const node = process.env.PVE_SANDBOX_NODE;
  if (!dir || !node) {
    process.stderr.write(`${tool}: sandbox CLI needs PVE_SANDBOX_DIR and PVE_SANDBOX_NODE\n`);
    return 255;
  }
  const startedAt = Date.now();
  let exitCode = 255;
  const record = () =>
    appendCall(dir, { node, argv: [tool, ...args], exitCode, startedAt: new Date(startedAt).toISOString(), durationMs: Date.now() - startedAt });
  for (const [sig, code] of [['SIGTERM', 143], ['SIGINT', 130], ['SIGHUP', 129]] as const) {
    process.on(sig, () => {
      exitCode = code;
      record();
      process.exit(code);
    });
  }

  let ctx: ReturnType<typeof makeCtx>;
  try {
    ctx = makeCtx(dir, node);
  } catch (e) {
    process.stderr.write(`sandbox: cannot read the cluster in ${dir}: ${(e as Error).message}\n`);
    return 255;
  }
  try {
    if (!nodeOf(ctx.model, node)) throw new CliError(`sandbox: '${node}' is not a node of the cluster in ${dir}`);
    for (const fault of takeFaults(dir, node, [tool, ...args])) {
      await sleep(fault.latencyMs ?? 0);
      if (fault.hangMs !== undefined) {
        await sleep(fault.hangMs);
        throw new CliError(fault.stderr ?? '', fault.exitCode ?? 255);
      }
      if (fault.stderr !== undefined || fault.exitCode !== undefined) {
        throw new CliError(fault.stderr ?? '', fault.exitCode ?? 255);
      }
    }
    exitCode = TOOLS[tool](ctx, args);
  } catch (e) {
    if (e instanceof CliError) {
      if (e.message) ctx.err(e.message.replace(/\n$/, ''));
      exitCode = e.exitCode;
    } else {
      ctx.err(`sandbox internal error: ${(e as Error).stack ?? e}`);
      exitCode = 255;
    }
  }
  record();
  return exitCode;
}

void main().then((code) => {
  process.exitCode = code;
  // Do not wait for anything left on the event loop (signal listeners keep none alive).
  process.exit(code);
});
