import fs from 'node:fs';
import { Command, Option } from 'commander';
import { vmid } from '../args';
import type { Context, Runner } from '../context';
import { CliError, EXIT } from '../exitCodes';
import { printAnswer, table } from '../output';

interface ScheduleRow {
  id: string;
  vmid: number | null;
  cron?: string;
  interval?: string;
  timezone?: string;
  paused: boolean;
  note: string | null;
  nextRun: string | null;
  lastRun: { scheduledAt: string; workflowId: string } | null;
}

function listText(b: { schedules: ScheduleRow[] }): string {
  if (b.schedules.length === 0) return 'no schedules';
  return table(
    ['ID', 'VMID', 'WHEN', 'PAUSED', 'NEXT RUN', 'LAST RUN'],
    b.schedules.map((s) => [s.id, s.vmid, s.cron ? `cron ${s.cron}${s.timezone ? ` ${s.timezone}` : ''}` : `every ${s.interval}`, s.paused ? 'yes' : 'no', s.nextRun, s.lastRun?.workflowId]),
  );
}

/** The timing, policy and note flags that create and update share. */
function timingOptions(cmd: Command): Command {
  return cmd
    .option('--cron <expr>', 'cron expression, 5 fields or @daily and friends')
    .option('--interval <every>', 'an interval: 1d, 6h, 90m, 1h30m')
    .option('--timezone <tz>', 'IANA time zone of the cron expression (default UTC)')
    .addOption(new Option('--overlap <policy>', 'what a run does when the previous one still runs').choices(['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'ALLOW_ALL']))
    .option('--note <text>', 'a note shown with the schedule')
    .option('--passwd <password>', 'cloud-init password of the rebuilt VM');
}

interface ScheduleFlags {
  id?: string;
  vmid?: number;
  specFile?: string;
  cron?: string;
  interval?: string;
  timezone?: string;
  overlap?: string;
  note?: string;
  passwd?: string;
  paused?: boolean;
}

function scheduleBody(flags: ScheduleFlags): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const key of ['id', 'vmid', 'cron', 'interval', 'timezone', 'overlap', 'note', 'passwd', 'paused'] as const) {
    if (flags[key] !== undefined) body[key] = flags[key];
  }
  if (flags.specFile) {
    try {
      body.spec = JSON.parse(fs.readFileSync(flags.specFile, 'utf8'));
    } catch (err) {
      throw new CliError(`${flags.specFile}: ${(err as Error).message}`, EXIT.usage);
    }
  }
  return body;
}

export function schedulesCommand(run: Runner): Command {
  const cmd = new Command('schedules').alias('schedule').description('rebuild schedules (Temporal Schedules)');
  const at = (id: string, op = '') => `/api/schedules/${encodeURIComponent(id)}${op}`;
  const reason = (c: Command) => c.option('--reason <text>', 'why, kept in the schedule');

  cmd
    .command('list', { isDefault: true })
    .description('every rebuild schedule')
    .action(run(async (ctx: Context) => printAnswer(ctx, await ctx.client.call('GET', '/api/schedules'), listText)));
  cmd
    .command('show')
    .argument('<id>', 'schedule id')
    .description('a schedule with its next and recent runs')
    .action(run(async (ctx, id: string) => printAnswer(ctx, await ctx.client.call('GET', at(id)))));
  timingOptions(
    cmd
      .command('create')
      .description('a schedule that rebuilds a VM (--vmid) or installs and rebuilds one from a spec (--spec-file)')
      .option('--id <id>', 'schedule id (default rebuild-vm-<vmid>)')
      .option('--vmid <vmid>', 'a VM QemuRun installed, rebuilt from the spec it records', vmid)
      .option('--spec-file <spec.json>', 'an install body with "id": the VM to rebuild (installed when missing)')
      .option('--paused', 'create it paused'),
  ).action(run(async (ctx, flags: ScheduleFlags) => printAnswer(ctx, await ctx.client.call('POST', '/api/schedules', { body: scheduleBody(flags) }))));
  timingOptions(
    cmd
      .command('update')
      .argument('<id>', 'schedule id')
      .description("change a schedule's timing, overlap, note or password; what is not given is kept")
      .option('--spec-file <spec.json>', 'a new spec (schedules made from a spec)'),
  ).action(run(async (ctx, id: string, flags: ScheduleFlags) => printAnswer(ctx, await ctx.client.call('PATCH', at(id), { body: scheduleBody(flags) }))));
  cmd
    .command('delete')
    .argument('<id>', 'schedule id')
    .description('delete a schedule; the runs it started stay in history')
    .action(run(async (ctx, id: string) => printAnswer(ctx, await ctx.client.call('DELETE', at(id)))));
  cmd
    .command('trigger')
    .argument('<id>', 'schedule id')
    .description('run it now (refused while paused)')
    .action(run(async (ctx, id: string) => printAnswer(ctx, await ctx.client.call('POST', at(id, '/trigger')))));
  for (const op of ['pause', 'unpause'] as const) {
    reason(cmd.command(op).argument('<id>', 'schedule id').description(`${op} a schedule`)).action(
      run(async (ctx, id: string, o: { reason?: string }) =>
        printAnswer(ctx, await ctx.client.call('POST', at(id, `/${op}`), { body: o.reason ? { reason: o.reason } : undefined })),
      ),
    );
  }
  return cmd;
}
