import { parseArgs, type CommandDef } from '../args';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { uriUnescape } from '../../state/escape';
import { loadVm } from './vm';

/**
 * `qm cloudinit dump <vmid> user`: the user-data Proxmox generates for the cloud-init
 * drive, line for line as PVE::QemuServer::Cloudinit writes it. Unlike `qm config`, it
 * shows the stored `cipassword` (the crypt hash) as `password:`.
 */
const DUMP: CommandDef = {
  name: 'qm cloudinit dump',
  args: ['vmid', 'type'],
  props: { vmid: VMID, type: { type: 'string', enum: ['meta', 'network', 'user', 'vendor'] } },
};

export function qmCloudinitDump(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(DUMP, argv);
  const conf = loadVm(ctx, Number(p.vmid));
  if (p.type !== 'user') {
    ctx.out('#cloud-config');
    return 0;
  }
  const props = conf.props;
  const hostname = (props.name ?? `VM${p.vmid}`).split('.')[0];
  const lines = ['#cloud-config', `hostname: ${hostname}`, 'manage_etc_hosts: true', `fqdn: ${props.name ?? hostname}`];
  if (props.ciuser !== undefined) lines.push(`user: ${props.ciuser}`);
  if (props.ciuser === 'root') lines.push('disable_root: False');
  if (props.cipassword !== undefined) lines.push(`password: ${props.cipassword}`);
  if (props.sshkeys !== undefined) {
    lines.push('ssh_authorized_keys:');
    for (const k of uriUnescape(props.sshkeys).split('\n').filter((l) => /\S/.test(l))) lines.push(`  - ${k}`);
  }
  lines.push('chpasswd:', '  expire: False');
  if (props.ciuser !== 'root') lines.push('users:', '  - default');
  if (props.ciupgrade === undefined || props.ciupgrade === '1') lines.push('package_upgrade: true');
  for (const l of lines) ctx.out(l);
  return 0;
}
