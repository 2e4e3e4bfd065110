import { parseArgs, type CommandDef } from '../args';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { encodeText } from '../../state/escape';
import { listVms } from '../../state/vmlist';
import { vmProcess } from '../../state/runtime';
import { loadVm, withVmLock, writeVm } from './vm';
import { maxdisk, maxmem } from '../resources';

/** `qm config`, `qm status`, `qm list`, `qm unlock`: reading (and unlocking) local VMs. */

const CONFIG: CommandDef = {
  name: 'qm config',
  args: ['vmid'],
  props: { vmid: VMID, current: { type: 'boolean', optional: true }, snapshot: { type: 'string', optional: true } },
};
const STATUS: CommandDef = { name: 'qm status', args: ['vmid'], props: { vmid: VMID, verbose: { type: 'boolean', optional: true } } };
const LIST: CommandDef = { name: 'qm list', args: [], props: { full: { type: 'boolean', optional: true } } };
const UNLOCK: CommandDef = { name: 'qm unlock', args: ['vmid'], props: { vmid: VMID } };

export function qmConfig(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(CONFIG, argv);
  const conf = loadVm(ctx, Number(p.vmid));
  const shown: Record<string, string> = { ...conf.props };
  if (conf.description !== undefined) shown.description = encodeText(conf.description);
  if (shown.cipassword !== undefined) shown.cipassword = '**********';
  for (const k of Object.keys(shown).sort()) ctx.out(`${k}: ${shown[k]}`);
  return 0;
}


export function qmStatus(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(STATUS, argv);
  const vmid = Number(p.vmid);
  const conf = loadVm(ctx, vmid);
  const proc = vmProcess(ctx.dir, vmid);
  const status = proc ? 'running' : 'stopped';
  if (p.verbose !== '1') {
    ctx.out(`status: ${status}`);
    return 0;
  }
  const stat: Record<string, string | number> = {
    cpus: Number(conf.props.cores ?? 1) * Number(conf.props.sockets ?? 1),
    disk: 0,
    diskread: 0,
    diskwrite: 0,
    maxdisk: maxdisk(conf),
    maxmem: maxmem(conf),
    mem: proc ? Math.floor(maxmem(conf) * 0.3) : 0,
    netin: 0,
    netout: 0,
    qmpstatus: status,
    status,
    uptime: proc ? Math.floor((Date.now() - proc.startedAt) / 1000) : 0,
    vmid,
  };
  if (conf.props.name) stat.name = conf.props.name;
  if (proc) stat.pid = proc.pid;
  if (conf.props.lock) stat.lock = conf.props.lock;
  if (conf.props.tags) stat.tags = conf.props.tags;
  for (const k of Object.keys(stat).sort()) ctx.out(`${k}: ${stat[k]}`);
  return 0;
}

function pad(s: string, w: number, right = false): string {
  return right ? s.padStart(w) : s.padEnd(w);
}

export function qmList(ctx: Ctx, argv: string[]): number {
  parseArgs(LIST, argv);
  const vms = listVms(ctx.dir).filter((v) => v.node === ctx.node);
  if (vms.length === 0) return 0;
  const row = (c: string[]) => `${pad(c[0], 10, true)} ${pad(c[1], 20)} ${pad(c[2], 10)} ${pad(c[3], 10)} ${pad(c[4], 12, true)} ${pad(c[5], 10)}`;
  ctx.out(row(['VMID', 'NAME', 'STATUS', 'MEM(MB)', 'BOOTDISK(GB)', 'PID']));
  for (const { vmid } of vms) {
    const conf = loadVm(ctx, vmid);
    const proc = vmProcess(ctx.dir, vmid);
    ctx.out(
      row([
        String(vmid),
        conf.props.name ?? '',
        proc ? 'running' : 'stopped',
        String(Math.trunc(maxmem(conf) / 1024 / 1024)),
        (maxdisk(conf) / 1024 ** 3).toFixed(2),
        String(proc?.pid ?? 0),
      ]),
    );
  }
  return 0;
}

export function qmUnlock(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(UNLOCK, argv);
  const vmid = Number(p.vmid);
  withVmLock(ctx, vmid, () => {
    const conf = loadVm(ctx, vmid);
    delete conf.props.lock;
    writeVm(ctx, vmid, conf);
  });
  return 0;
}

