import { appendCall } from '../state/callLog';
import { runTool, type Tool } from './run';

/**
 * Entry point of the sandbox's `qm`, `pvesh` and `pvesm` when they run as their own
 * process (sandbox/bin/* without a resident CLI server, or with a fault injected): finds
 * the cluster and node from the environment, runs the command and appends the call to
 * the cluster's call log.
 */
async function main(): Promise<number> {
  const [tool, ...args] = process.argv.slice(2) as [Tool, ...string[]];
  const dir = process.env.PVE_SANDBOX_DIR;
  const node = process.env.PVE_SANDBOX_NODE;
  if (!dir || !node) {
    process.stderr.write(`${tool}: sandbox CLI needs PVE_SANDBOX_DIR and PVE_SANDBOX_NODE\n`);
    return 255;
  }
  const startedAt = Date.now();
  const startupMs = Math.max(0, Math.round(startedAt - performance.timeOrigin));
  let exitCode = 255;
  const record = () =>
    appendCall(dir, { node, argv: [tool, ...args], exitCode, startedAt: new Date(startedAt).toISOString(), durationMs: Date.now() - startedAt, startupMs });
  for (const [sig, code] of [['SIGTERM', 143], ['SIGINT', 130], ['SIGHUP', 129]] as const) {
    process.on(sig, () => {
      exitCode = code;
      record();
      process.exit(code);
    });
  }
  const code = await runTool(dir, node, tool, args);
  if (code === undefined) return 255;
  exitCode = code;
  record();
  return exitCode;
}

void main().then((code) => {
  process.exitCode = code;
  // Do not wait for anything left on the event loop (signal listeners keep none alive).
  process.exit(code);
});
