import fs from 'node:fs';
import { CliError } from './errors';
import type { Ctx } from './context';
import type { VmConf } from '../state/vmconf';
import { readIfExists } from '../state/files';
import { vmProcess } from '../state/runtime';
import { qemuGaInterfaces, type GuestNetwork } from '../state/dhcp';
import { agentEnabled } from '../qemu/command';
import { guestAgentCommand } from '../qemu/qmp';
import { agentAddressesAsForwarded, sshForwardAddress } from '../qemu/network';

/**
 * `network-get-interfaces` (PVE::API2::Qemu::Agent, `qm guest cmd` and the API): the
 * guest's interfaces as its agent reports them, after qemu-server's assert_agent_available
 * (its three errors, in its order). A real guest's own qemu-ga answers, with the one
 * translation run backwards (../qemu/network.ts); a process guest's stand-in agent answers
 * once the guest has booted and its sshd listens, with the address it listens on.
 */
export async function agentNetworkInterfaces(ctx: Ctx, conf: VmConf, vmid: number): Promise<unknown[]> {
  if (!agentEnabled(conf)) throw new CliError('No QEMU guest agent configured');
  const running = vmProcess(ctx.dir, vmid);
  if (!running) throw new CliError(`VM ${vmid} is not running`);
  if (ctx.model.guests === 'qemu') {
    const socket = ctx.paths.qgaSocket(vmid);
    let result: unknown;
    try {
      if (!fs.existsSync(socket)) throw new Error('no socket');
      result = await guestAgentCommand(socket, 'guest-network-get-interfaces', undefined, 10_000);
    } catch {
      throw new CliError('QEMU guest agent is not running');
    }
    const host = sshForwardAddress(ctx.dir, conf, ctx.model.gateway, vmid);
    return agentAddressesAsForwarded(Array.isArray(result) ? result : [], host);
  }
  const raw = readIfExists(ctx.paths.guestNetwork(vmid));
  const network = raw ? (JSON.parse(raw) as GuestNetwork) : undefined;
  // A file of an earlier boot is no answer: this boot's agent has not come up.
  if (!network || network.pid !== running.pid) throw new CliError('QEMU guest agent is not running');
  return qemuGaInterfaces(network);
}
