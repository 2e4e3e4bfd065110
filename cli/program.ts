import { Command, CommanderError } from 'commander';
import { createContext, DEFAULT_URL, type Runner } from './context';
import { CliError, EXIT } from './exitCodes';
import { followOperation } from './operation';
import { installCommand } from './commands/install';
import { vmCommands } from './commands/vm';
import { schedulesCommand } from './commands/schedules';
import { reconcileCommand } from './commands/reconcile';
import { templatesCommand } from './commands/templates';
import { integer } from './args';
import { printAnswer } from './output';
import { UnreachableError } from './client';

/**
 * `qemurun`: the API's operations as commands. Every command is one or two HTTP calls to
 * QEMURUN_URL; nothing here reaches Temporal or Proxmox any other way.
 */
function buildProgram(setExit: (code: number) => void): Command {
  const program = new Command('qemurun')
    .description('Proxmox VMs from official cloud images, through the QemuRun API')
    .option('--url <url>', `the QemuRun server (env QEMURUN_URL, default ${DEFAULT_URL}); API_TOKEN is sent as the bearer token`)
    .option('--json', 'machine output: events as NDJSON, answers as JSON')
    .showHelpAfterError('(qemurun --help for usage)')
    .exitOverride();

  const run: Runner =
    (fn) =>
    async (...args) => {
      const command = args[args.length - 1] as Command;
      const ctx = createContext(command.optsWithGlobals());
      setExit(await fn(ctx, ...args.slice(0, -1)));
    };

  program.addCommand(installCommand(run));
  program
    .command('attach')
    .argument('<workflowId>', 'an install or any other operation (vm-<vmid>, rebuild-vm-...)')
    .description('follow an operation that is running (or show how it ended), from its first event or --after')
    .option('--after <eventId>', 'only the events after this one', integer)
    .option('--cancel-on-interrupt', 'Ctrl-C cancels the operation instead of detaching')
    .action(run((ctx, workflowId: string, o: { after?: number; cancelOnInterrupt?: boolean }) => followOperation(ctx, { workflowId, after: o.after }, o)));
  program
    .command('cancel')
    .argument('<workflowId>', 'a running operation')
    .description('cancel an operation; an install removes the VM it created')
    .action(
      run(async (ctx, workflowId: string) => {
        return printAnswer(ctx, await ctx.client.call('POST', `/api/workflows/${encodeURIComponent(workflowId)}/cancel`));
      }),
    );
  for (const c of vmCommands(run)) program.addCommand(c);
  program.addCommand(schedulesCommand(run));
  program.addCommand(reconcileCommand(run));
  program.addCommand(templatesCommand(run));
  // Subcommands report usage errors through the same override as the program.
  for (const c of allCommands(program)) c.exitOverride().showHelpAfterError('(qemurun --help for usage)');
  return program;
}

function allCommands(c: Command): Command[] {
  return c.commands.flatMap((sub) => [sub, ...allCommands(sub)]);
}

/** Runs the CLI; resolves to the exit status. */
export async function runCli(argv: string[], stderr: NodeJS.WritableStream = process.stderr): Promise<number> {
  let code: number = EXIT.ok;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof UnreachableError) {
      stderr.write(`qemurun: ${err.message}\n`);
      return EXIT.unreachable;
    }
    if (err instanceof CliError) {
      stderr.write(`qemurun: ${err.message}\n`);
      return err.exitCode;
    }
    stderr.write(`qemurun: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.failed;
  }
}
