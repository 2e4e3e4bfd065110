import { makeCtx } from '../cli/context';
import { CliError } from '../cli/errors';
import { qm } from '../cli/qm';
import { createVm } from '../cli/qm/create';
import { updateVm } from '../cli/qm/set';
import { resizeDisk } from '../cli/qm/resize';
import { templateVm } from '../cli/qm/template';
import { takeFaults } from '../state/faults';
import { appendTaskLine, taskLogFile, type TaskJob } from './tasks';
import { downloadUrl } from './download';

/**
 * One worker task of the sandbox's REST API, in a process of its own (see tasks.ts). Loads
 * its modules first (it may be started ahead as a spare), then reads `{dir, node, upid,
 * job}` on stdin, runs the job with the same code as the CLIs, writes
 * what it prints to the task log, then the exit status line.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A task stopped through the API (DELETE .../tasks/<upid>) ends as PVE's do. The handler is
 * set before the job is read: the task is listed as running from the moment its UPID
 * exists, and a stop may come before this process has read which task it is.
 */
let interrupt: (() => void) | undefined;
let interrupted = false;
process.once('SIGTERM', () => {
  if (interrupt) interrupt();
  else interrupted = true;
});

async function run(input: { dir: string; node: string; upid: string; job: TaskJob }): Promise<void> {
  const log = taskLogFile(input.dir, input.upid)!;
  const write = (line: string) => appendTaskLine(log, line);
  interrupt = () => {
    write('TASK ERROR: received interrupt');
    process.exit(0);
  };
  if (interrupted) return interrupt();
  // PVE::RESTEnvironment counts log_warn's lines; a task with any ends `TASK WARNINGS: n`.
  let warnings = 0;
  const logged = (line: string) => {
    if (line.startsWith('WARN: ')) warnings++;
    write(line);
  };
  const ctx = makeCtx(input.dir, input.node, { out: logged, err: logged });
  const { job } = input;
  try {
    for (const fault of takeFaults(input.dir, input.node, job.faultArgv)) {
      if (fault.at !== undefined) {
        (ctx.stepFaults ??= []).push(fault);
        continue;
      }
      await sleep(fault.latencyMs ?? 0);
      if (fault.hangMs !== undefined) await sleep(fault.hangMs);
      if (fault.hangMs !== undefined || fault.stderr !== undefined || fault.exitCode !== undefined) throw new CliError(fault.stderr ?? 'command failed');
      for (const w of fault.warn ?? []) {
        write(`WARN: ${w}`);
        warnings++;
      }
    }
    if (job.denied !== undefined) throw new CliError(job.denied);
    if (job.op === 'qm') await qm(ctx, job.argv!);
    else if (job.op === 'create') createVm(ctx, job.params!);
    else if (job.op === 'config') updateVm(ctx, job.params!);
    else if (job.op === 'resize') resizeDisk(ctx, job.params!);
    else if (job.op === 'template') templateVm(ctx, job.params!);
    else await downloadUrl(ctx, job.params!, write);
    write(warnings > 0 ? `TASK WARNINGS: ${warnings}` : 'TASK OK');
  } catch (e) {
    const msg = e instanceof CliError ? e.message : `${(e as Error).stack ?? e}`;
    write(`TASK ERROR: ${msg.replace(/\n+$/, '').replace(/\n/g, ' ')}`);
  }
}

let raw = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d: string) => (raw += d));
process.stdin.on('end', () => {
  // A spare worker whose server went away before giving it a job.
  if (raw === '') process.exit(0);
  run(JSON.parse(raw) as { dir: string; node: string; upid: string; job: TaskJob })
    .catch((e) => process.stderr.write(`sandbox task worker: ${(e as Error).stack}\n`))
    .finally(() => process.exit(0));
});
