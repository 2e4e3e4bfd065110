import { parseArgs, type CommandDef } from '../args';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { cloudinitUserdata, nocloudMetadata, nocloudNetwork } from '../../state/cloudinit';
import { nodeResolv } from '../../qemu/network';
import { loadVm } from './vm';

/**
 * `qm cloudinit dump <vmid> user|network|meta`: what Proxmox generates for the cloud-init
 * drive, line for line as PVE::QemuServer::Cloudinit writes it (../../state/cloudinit.ts).
 * Unlike `qm config`, it shows the stored `cipassword` (the crypt hash) as `password:`.
 */
const DUMP: CommandDef = {
  name: 'qm cloudinit dump',
  args: ['vmid', 'type'],
  props: { vmid: VMID, type: { type: 'string', enum: ['meta', 'network', 'user', 'vendor'] } },
};

export function qmCloudinitDump(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(DUMP, argv);
  const vmid = Number(p.vmid);
  const conf = loadVm(ctx, vmid);
  // dump_cloudinit_config: `user`, `network`, and the metadata for anything else.
  const user = cloudinitUserdata(conf, vmid);
  const text = p.type === 'user' ? user : p.type === 'network' ? nocloudNetwork(conf, nodeResolv()) : nocloudMetadata(user, nocloudNetwork(conf, nodeResolv()));
  for (const l of text.replace(/\n$/, '').split('\n')) ctx.out(l);
  return 0;
}
