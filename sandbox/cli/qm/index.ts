import { CliError } from '../errors';
import type { Ctx } from '../context';
import { qmCreate } from './create';
import { qmSet } from './set';
import { qmImportDisk } from './importDisk';
import { qmResize } from './resize';
import { qmMigrate } from './migrate';
import { qmReboot, qmShutdown, qmStart, qmStop } from './power';
import { qmDestroy } from './destroy';
import { qmConfig, qmList, qmStatus, qmUnlock } from './read';
import { qmCloudinitDump } from './cloudinit';
import { qmGuestCmd } from './guest';
import { qmTemplate } from './template';
import { qmClone } from './clone';

type Handler = (ctx: Ctx, argv: string[]) => number | Promise<number>;

const COMMANDS: Record<string, Handler> = {
  create: qmCreate,
  set: qmSet,
  'disk import': qmImportDisk,
  'disk resize': qmResize,
  migrate: qmMigrate,
  start: qmStart,
  stop: qmStop,
  shutdown: qmShutdown,
  reboot: qmReboot,
  destroy: qmDestroy,
  config: qmConfig,
  status: qmStatus,
  list: qmList,
  unlock: qmUnlock,
  'cloudinit dump': qmCloudinitDump,
  'guest cmd': qmGuestCmd,
  template: qmTemplate,
  clone: qmClone,
};

/** qm.pm's aliases of the `disk` command group. */
const ALIASES: Record<string, string> = { importdisk: 'disk import', resize: 'disk resize' };

function usage(reason: string): CliError {
  const lines = Object.keys(COMMANDS)
    .sort()
    .map((c) => `       qm ${c}`);
  return new CliError(`ERROR: ${reason}\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n\n${lines.join('\n')}\n`);
}

export function qm(ctx: Ctx, argv: string[]): number | Promise<number> {
  if (argv.length === 0) throw usage('no command specified');
  let [cmd, ...rest] = argv;
  cmd = ALIASES[cmd] ?? cmd;
  if (cmd === 'disk' || cmd === 'cloudinit' || cmd === 'guest') {
    if (rest.length === 0) throw usage(`incomplete command '${cmd}'`);
    cmd = `${cmd} ${rest[0]}`;
    rest = rest.slice(1);
  }
  const handler = COMMANDS[cmd];
  if (!handler) throw usage(`unknown command 'qm ${cmd}'`);
  return handler(ctx, rest);
}
