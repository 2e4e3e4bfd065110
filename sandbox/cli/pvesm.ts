import { parseArgs, type CommandDef } from './args';
import { CliError } from './errors';
import type { Ctx } from './context';
import * as f from './formats';
import { storagesOn } from '../state/model';
import { listVolumes } from '../state/volumes';
import { fileVolume, usedBytes } from './storage';

const STATUS: CommandDef = {
  name: 'pvesm status',
  args: [],
  props: {
    storage: { type: 'string', optional: true, format: f.storageId },
    content: { type: 'string', optional: true },
    enabled: { type: 'boolean', optional: true },
    target: { type: 'string', optional: true, format: f.nodeName },
    format: { type: 'boolean', optional: true },
  },
};

const LIST: CommandDef = {
  name: 'pvesm list',
  args: ['storage'],
  props: { storage: { type: 'string', format: f.storageId }, content: { type: 'string', optional: true }, vmid: { type: 'integer', optional: true } },
};

const PATH: CommandDef = { name: 'pvesm path', args: ['volume'], props: { volume: { type: 'string' } } };

/**
 * `pvesm path <volume>`: the file behind a volume of a file-based storage. Proxmox prints
 * where the storage's `path` puts it (`/var/lib/vz/snippets/…`); the sandbox prints the
 * file it keeps in its cluster directory, which is what a caller writes to and reads from.
 * Like Proxmox, it does not check that the file exists or that the storage takes the type.
 */
function pathOf(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(PATH, argv);
  const vol = fileVolume(ctx, p.volume!);
  ctx.out(vol.file ?? vol.shown);
  return 0;
}

/**
 * `pvesm status` with pvesm.pm's exact printf layout (PVE 8 headings, sizes in KiB), and
 * `pvesm list`.
 */
function status(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(STATUS, argv);
  let list = storagesOn(ctx.model, ctx.node);
  if (p.storage) {
    list = list.filter((s) => s.id === p.storage);
    if (list.length === 0) throw new CliError(`storage '${p.storage}' does not exist`);
  }
  if (p.content) list = list.filter((s) => p.content!.split(',').every((c) => s.content.includes(c)));
  if (p.enabled === '1') list = list.filter((s) => s.enabled);
  if (p.target) list = list.filter((s) => !s.nodes || s.nodes.includes(p.target!));

  const maxlen = Math.max(0, ...list.map((s) => s.id.length)) + 1;
  const r = (s: string, w: number) => s.padStart(w);
  ctx.out(`${'Name'.padEnd(maxlen)} ${r('Type', 10)} ${r('Status', 10)} ${r('Total', 15)} ${r('Used', 15)} ${r('Available', 15)} ${r('%', 8)}`);
  for (const s of [...list].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    const live = s.active && s.enabled;
    const total = live ? s.totalBytes : 0;
    const used = live ? usedBytes(ctx, s, ctx.node) : 0;
    const avail = Math.max(0, total - used);
    const kib = (b: number) => String(Math.trunc(b / 1024));
    const per = !s.enabled ? r('N/A', 8) : `${r((total > 0 ? (used * 100) / total : 0).toFixed(2), 7)}%`;
    const state = !s.enabled ? 'disabled' : s.active ? 'active' : 'inactive';
    ctx.out(`${s.id.padEnd(maxlen)} ${r(s.type, 10)} ${r(state, 10)} ${r(kib(total), 15)} ${r(kib(used), 15)} ${r(kib(avail), 15)} ${per}`);
  }
  return 0;
}

function list(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(LIST, argv);
  const s = storagesOn(ctx.model, ctx.node).find((x) => x.id === p.storage);
  if (!s) throw new CliError(`storage '${p.storage}' does not exist`);
  const vols = listVolumes(ctx.dir, ctx.node, s.id)
    .filter((v) => !p.vmid || v.vmid === Number(p.vmid))
    .sort((a, b) => (a.volid < b.volid ? -1 : 1));
  const w = Math.max(5, ...vols.map((v) => v.volid.length));
  const sw = Math.max(4, ...vols.map((v) => String(v.sizeBytes).length));
  ctx.out(`${'Volid'.padEnd(w)} ${'Format'.padEnd(7)} ${'Type'.padEnd(9)} ${'Size'.padStart(sw)} VMID`);
  for (const v of vols) ctx.out(`${v.volid.padEnd(w)} ${v.format.padEnd(7)} ${'images'.padEnd(9)} ${String(v.sizeBytes).padStart(sw)} ${v.vmid}`);
  return 0;
}

export function pvesm(ctx: Ctx, argv: string[]): number {
  const [cmd, ...rest] = argv;
  if (cmd === 'status') return status(ctx, rest);
  if (cmd === 'list') return list(ctx, rest);
  if (cmd === 'path') return pathOf(ctx, rest);
  throw new CliError(`ERROR: ${cmd ? `unknown command 'pvesm ${cmd}'` : 'no command specified'}\nUSAGE: pvesm <COMMAND> [ARGS] [OPTIONS]\n\n       pvesm list <storage> [OPTIONS]\n       pvesm path <volume>\n       pvesm status  [OPTIONS]\n`);
}
