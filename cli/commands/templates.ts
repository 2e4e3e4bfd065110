import { Command } from 'commander';
import type { Runner } from '../context';
import { followOperation } from '../operation';
import { printAnswer, table } from '../output';

interface TemplatesBody {
  count: number;
  templates: Array<{ vmid: number; name?: string; node: string; os: string; version: string; storage: string; builtAt: string; state: string }>;
  schedules: Array<{ target: string; scheduleId: string; cron: string }>;
}

function templatesText(b: TemplatesBody): string {
  const templates =
    b.count === 0
      ? 'no templates: installs build from the cloud image (qemurun templates build <os> <version> makes one)'
      : table(
          ['VMID', 'NAME', 'OS', 'NODE', 'STORAGE', 'BUILT', 'STATE'],
          b.templates.map((t) => [t.vmid, t.name ?? '-', `${t.os} ${t.version}`, t.node, t.storage, t.builtAt, t.state]),
        );
  const schedules = b.schedules.length === 0 ? 'no template schedules (TEMPLATES is not set)' : table(['TARGET', 'SCHEDULE', 'CRON'], b.schedules.map((s) => [s.target, s.scheduleId, s.cron]));
  return `${templates}\n\n${schedules}`;
}

/** `qemurun templates` lists the golden templates; `qemurun templates build` makes one now and follows it. */
export function templatesCommand(run: Runner): Command {
  const templates = new Command('templates')
    .description('the golden templates installs clone, and their refresh schedules')
    .action(run(async (ctx) => printAnswer(ctx, await ctx.client.call('GET', '/api/templates'), templatesText)));
  templates
    .command('build')
    .argument('<os>', 'debian, ubuntu or rockylinux')
    .argument('<version>', 'the OS version, e.g. 12 or 24.04')
    .option('--storage <storage>', 'the storage of its disk (default: ASSIGN_STORAGE)')
    .option('--async', 'start the build and print its workflow id, without following it')
    .description('build (or rebuild) the template of an OS version now, and follow it')
    .action(
      run(async (ctx, os: string, version: string, o: { storage?: string; async?: boolean }) => {
        const answer = await ctx.client.call('POST', '/api/templates', { body: { os, version, ...(o.storage !== undefined ? { storage: o.storage } : {}) } });
        const workflowId = (answer.body as { workflowId?: string } | undefined)?.workflowId;
        if (o.async || answer.status !== 202 || workflowId === undefined) return printAnswer(ctx, answer);
        return followOperation(ctx, { workflowId }, {});
      }),
    );
  return templates;
}
