import { Context, sleep } from '@temporalio/activity';
import type { Config } from '../lib/config';
import { onVmNode, type ProxmoxCluster } from '../lib/proxmox';
import { agentAddress } from '../lib/vm/address';
import { failure, field, checkedInput } from '../contract';
import { knownNode } from './managedSet';

export interface GuestAddressDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * Answers waiting does not change: a guest agent that will never answer (qemu-server's
 * assert_agent_available), or a token without the agent's privilege (API mode's 403, which
 * names it: `VM.GuestAgent.Audit` on Proxmox VE 9, `VM.Monitor` on 8).
 */
const FINAL = /No QEMU guest agent configured|Permission check failed/;

/** One question to the guest agent about net0's IPv4 address; `reason` says why there is none. */
export async function askGuestAddress(proxmox: ProxmoxCluster, vmid: number, known: string | undefined): Promise<{ ip: string } | { reason: string }> {
  try {
    return await onVmNode(proxmox, vmid, known, async (node) => agentAddress(node, vmid, await node.config(vmid)));
  } catch (err) {
    return { reason: (err as Error).message.split('\n')[0] };
  }
}

/** The VM's address as its guest agent reports it, through Proxmox. */
export function guestAddressActivities({ config, proxmox }: GuestAddressDeps) {
  return {
    /**
     * net0's IPv4 address as the guest agent reports it (`network-get-interfaces`). With
     * `wait` (a DHCP install: nothing else knows the lease) it asks until the agent answers
     * with an address, for SSH_WAIT_TIMEOUT, and then fails for good, naming the VM.
     * Without, it asks once and says why there is no address: a static install only
     * compares, and never fails because the agent is silent.
     */
    async readGuestAddress(input: { vmid: number; wait?: boolean; node?: string }): Promise<{ ip?: string; reason?: string }> {
      checkedInput(field.vmid, input.vmid, 'readGuestAddress');
      const { vmid } = input;
      const known = knownNode(input, 'readGuestAddress');
      const ctx = Context.current();
      const deadline = Date.now() + config.sshWaitTimeoutSec * 1000;
      let reason = 'no answer';
      for (let attempt = 1; ; attempt++) {
        ctx.heartbeat({ attempt });
        const answer = await askGuestAddress(proxmox, vmid, known);
        if ('ip' in answer) return answer;
        reason = answer.reason;
        if (!input.wait) return { reason };
        if (FINAL.test(reason)) throw failure('GuestAddressError', `VM ${vmid}'s address cannot be read: ${reason}`);
        if (Date.now() >= deadline) {
          throw failure('GuestAddressError', `VM ${vmid}'s guest agent reported no address within ${config.sshWaitTimeoutSec}s: ${reason}`);
        }
        await sleep(Math.min(5000, 500 * attempt));
      }
    },
  };
}
