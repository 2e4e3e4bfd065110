import { Context, sleep } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { onVmNode, type ProxmoxCluster } from '../lib/proxmox';
import { connectGuest, execOnGuest, peekHostKey, type GuestTarget } from '../lib/guestSsh';
import { fingerprint, hostKeyLine, parseHostKey } from '../lib/guestHostKey';
import { hashRootPassword } from '../lib/rootPassword';
import { ensureSshKey } from '../lib/sshKey';
import { initScriptEnv, initScriptFor } from '../lib/initScripts';
import { REBOOT_NEED_SCRIPT, parseRebootNeed } from '../lib/rebootNeed';
import { shellQuote } from '../lib/executor/quote';
import { portAnswers } from '../lib/network';
import { type OutputStream, outputStream } from './output';
import { keepAlive } from './keepAlive';
import { askGuestAddress } from './guestAddress';
import { knownNode } from './managedSet';
import { type Activities, failure, field, isFailureOf, type InitScriptRun, type PinnedHostKey, checkedInput } from '../contract';
import type { ApplicationFailure } from '@temporalio/common';
import type { Client as SshClient } from 'ssh2';

/** How often waitForSsh looks for a listening sshd; a refused connection costs nothing. */
const SSH_PORT_POLL_MS = 250;
/** How often it looks again once a key was seen but the login is not ready. */
const SSH_READY_POLL_MS = 500;

export interface GuestDeps {
  config: Config;
  client: Client;
  proxmox: ProxmoxCluster;
}

/** The key sshd makes on a guest's first boot; every supported image has one. */
export const GUEST_HOST_KEY_FILE = '/etc/ssh/ssh_host_ed25519_key.pub';

/** Activities that talk to the VM itself over SSH, with the key every VM trusts. */
export function guestActivities({ config, client, proxmox }: GuestDeps) {
  const key = () => ensureSshKey(config.sshKeyPath).privateKey;

  /**
   * The guest's host key as its QEMU guest agent reads it, through Proxmox; undefined
   * while the agent, or the key (made on first boot), is not there yet. Asked on `known`,
   * the node the workflow put the VM on, when it is still there.
   */
  async function agentHostKey(vmid: number, known: string | undefined): Promise<{ key?: string; error: string }> {
    try {
      const file = await onVmNode(proxmox, vmid, known, (node) => node.agentFileRead(vmid, GUEST_HOST_KEY_FILE));
      return { key: hostKeyLine(parseHostKey(file)), error: '' };
    } catch (err) {
      return { error: (err as Error).message.split('\n')[0] };
    }
  }

  /**
   * A connection to a guest that answered SSH before (waitForSsh) but may be slow to
   * shake hands now: a guest busy with dpkg, or one whose earlier init script was cut off
   * with its worker, can take longer than one handshake timeout. Connection failures are
   * retried until SSH_WAIT_TIMEOUT, as waitForSsh waits; a host key that is not the pinned
   * one is final at once.
   */
  async function connectWhenAnswering(target: GuestTarget) {
    const deadline = Date.now() + config.sshWaitTimeoutSec * 1000;
    for (let attempt = 1; ; attempt++) {
      try {
        return await connectGuest(target);
      } catch (err) {
        if (isFailureOf((err as ApplicationFailure).type, 'HostKeyMismatchError') || Date.now() >= deadline) throw err;
        await sleep(Math.min(5000, 500 * attempt));
      }
    }
  }

  /** The install's connection to its guest as its user, with the host key waitForSsh pinned. */
  const connectPinned = (input: { ip: string; user: string; hostKey?: string; vmid?: number }) =>
    connectWhenAnswering({
      host: input.ip,
      port: config.vmSshPort,
      username: input.user,
      privateKey: key(),
      hostKey: input.hostKey,
      hostKeySource: `pinned for VM ${input.vmid ?? '?'}`,
    });

  /** See waitForCloudInit. */
  async function cloudInitDone(conn: SshClient, out: OutputStream, input: { ip: string; vmid?: number }): Promise<void> {
    const ctx = Context.current();
    let status = '';
    const code = await keepAlive(() =>
      execOnGuest(conn, `timeout ${config.sshWaitTimeoutSec} cloud-init status --wait`, {
        signal: ctx.cancellationSignal,
        onLine: (line) => {
          const m = /^status:\s*(.+)$/.exec(line.trim());
          if (m) status = m[1];
        },
      }),
    );
    if (code === 124) {
      throw failure('CloudInitTimeoutError', `cloud-init did not finish within SSH_WAIT_TIMEOUT (${config.sshWaitTimeoutSec} s) on VM ${input.vmid ?? input.ip}`);
    }
    if (code === 1 || code === 2) {
      out.line(`[!] cloud-init finished with ${code === 1 ? 'errors' : 'warnings'} (status: ${status || 'unknown'}); see /var/log/cloud-init.log on the VM`, 'info');
    }
  }

  return {
    /**
     * Polls until the guest accepts the service's key; cloud-init may take minutes.
     * With a VMID, only the host key the guest agent reports is accepted (or `hostKey`, one
     * pinned before); a guest whose agent stays silent for GUEST_AGENT_WAIT after its SSH
     * answers is trusted on first use, unless `pinnedOnly`: after the install (a start, a
     * reboot), the guest has its agent (the init script enabled it), so a silent agent is
     * no reason to trust whatever answers at the address, and the wait goes on until the
     * agent vouches for the key or SSH_WAIT_TIMEOUT. Returns the key to pin for the
     * install's later connections. Without a VMID (runs recorded before) any key will do.
     */
    async waitForSsh(input: Parameters<Activities['waitForSsh']>[0]): Promise<PinnedHostKey | undefined> {
      const ctx = Context.current();
      const known = knownNode(input, 'waitForSsh');
      const deadline = Date.now() + config.sshWaitTimeoutSec * 1000;
      const target: GuestTarget = { host: input.ip, port: config.vmSshPort, username: input.user, privateKey: key() };
      let lastError = 'no answer';
      let agentKey: string | undefined;
      let agentError = '';
      let firstSeen: { key: string; at: number } | undefined;
      let unready = 0;
      for (let attempt = 1; Date.now() < deadline; attempt++) {
        ctx.heartbeat({ attempt });
        // Until the guest's sshd listens, a refused (or unanswered, half a second) connection
        // costs nothing, while each question to the guest agent is a Proxmox call: look
        // often, at a fixed interval, and ask the agent only once SSH is up (the agent starts
        // before sshd, so it is there to ask by then).
        if (!(await portAnswers(input.ip, config.vmSshPort))) {
          lastError = `nothing accepts connections on ${input.ip}:${config.vmSshPort}`;
          await sleep(SSH_PORT_POLL_MS);
          continue;
        }
        if (input.vmid !== undefined && agentKey === undefined) ({ key: agentKey, error: agentError } = await agentHostKey(input.vmid, known));
        if (agentKey && input.hostKey && agentKey !== input.hostKey) {
          throw failure(
            'HostKeyMismatchError',
            `VM ${input.vmid}'s guest agent reports host key ${fingerprint(parseHostKey(agentKey).blob)}, not the ${fingerprint(parseHostKey(input.hostKey).blob)} SSH at ${input.ip} showed before`,
          );
        }
        const pinned = agentKey ?? input.hostKey;
        try {
          if (!pinned && input.vmid !== undefined) {
            // No key to hold the server to yet: learn what it shows without logging in,
            // and trust that only when the agent stays silent (GUEST_AGENT_WAIT).
            const seen = await peekHostKey(target, 5000);
            if (firstSeen?.key !== seen) firstSeen = { key: seen, at: Date.now() };
            if (!input.pinnedOnly && Date.now() - firstSeen.at >= config.guestAgentWaitSec * 1000) {
              ctx.log.warn('guest agent did not answer: trusting the host key first seen', { vmid: input.vmid, agentError });
              input = { ...input, hostKey: seen };
              continue;
            }
            lastError = `SSH answers, waiting for the guest agent (${agentError})`;
          } else {
            const conn = await connectGuest(
              {
                ...target,
                hostKey: pinned,
                hostKeySource: agentKey ? `reported by VM ${input.vmid}'s guest agent` : firstSeen ? 'first seen at this address' : 'pinned for this VM',
              },
              5000,
            );
            try {
              const code = await execOnGuest(conn, 'true', { signal: ctx.cancellationSignal });
              if (code === 0) {
                if (!pinned) return undefined;
                const address = input.askAddress && input.vmid !== undefined ? await askGuestAddress(proxmox, input.vmid, known) : undefined;
                return {
                  hostKey: pinned,
                  source: agentKey ? 'guest agent' : 'first use',
                  fingerprint: fingerprint(parseHostKey(pinned).blob),
                  ...(address ? { address } : {}),
                };
              }
              lastError = `probe command exited with ${code}`;
            } finally {
              conn.end();
            }
          }
        } catch (err) {
          if (isFailureOf((err as ApplicationFailure).type, 'HostKeyMismatchError')) throw err;
          lastError = (err as Error).message;
        }
        // Once the agent or SSH has shown a key, what is missing comes within seconds: look
        // often. Before that, something accepts connections yet nothing is ready (a port
        // forward in front of a booting guest, a guest without sshd yet): each look costs a
        // Proxmox call, so back off.
        await sleep(agentKey !== undefined || firstSeen !== undefined ? SSH_READY_POLL_MS : Math.min(5000, 500 * ++unready));
      }
      // Waiting longer would not help; the workflow cleans up instead of retrying.
      throw failure(
        'SshTimeoutError',
        `SSH on ${input.ip}:${config.vmSshPort} did not answer for ${input.user} within ${config.sshWaitTimeoutSec}s: ${lastError}`,
      );
    },

    /**
     * Waits for cloud-init's first boot to finish (`cloud-init status --wait`) before the
     * init script runs, so the script's package work does not race cloud-init's and finds
     * its users, keys and network in place: a guest answers SSH while cloud-init still
     * runs. cloud-init exits 1 on an error (20.4 to 22.4) and, from 23.4, 2 when it is
     * "degraded" (recoverable errors). Neither fails the install: the service is logged
     * in already, so the keys and the user took; the output says what cloud-init reported.
     * An image without cloud-init has nothing to wait for. `status --wait` waits forever
     * for a cloud-init that never started, hence SSH_WAIT_TIMEOUT as its bound.
     */
    async waitForCloudInit(input: { ip: string; user: string; hostKey?: string; vmid?: number }): Promise<void> {
      checkedInput(field.user, input.user, 'waitForCloudInit');
      const conn = await connectPinned(input);
      const out = outputStream(client);
      try {
        await cloudInitDone(conn, out, input);
      } finally {
        conn.end();
        await out.close();
      }
    },

    /**
     * Delivers the OS init script over the SSH session itself (the VM need not reach the
     * API) and streams its output. Settings and the root password travel in the script's
     * stdin, never on a command line. The script is safe to run twice, so a retry after
     * a dropped connection is harmless. `phase` picks the part of the work for golden
     * templates and their clones (docs/init-scripts.md); absent, the full run. A template
     * or seal run gets no root password: the template's root stays locked, each clone's
     * own password is set by its clone run.
     */
    async runInitScript(input: Parameters<Activities['runInitScript']>[0]): Promise<InitScriptRun> {
      checkedInput(field.user, input.user, 'runInitScript');
      if (input.phase !== undefined) checkedInput(field.initScriptPhase, input.phase, 'runInitScript');
      const ctx = Context.current();
      const perVm = input.phase === undefined || input.phase === 'clone';
      const rootPassword = perVm ? (input.rootPassword ?? config.rootPassword) : undefined;
      // Only a crypt hash leaves the service: whoever might answer at the VM's address
      // gets nothing that logs in anywhere.
      const env = initScriptEnv(config.initScript, rootPassword ? { hash: hashRootPassword(rootPassword) } : undefined, input.phase);
      const exports = Object.entries(env)
        .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
        .join('\n');
      const script = `${exports}\n${initScriptFor(input.os, input.version)}`;
      const out = outputStream(client, [input.rootPassword ?? '', config.rootPassword ?? '']);
      const conn = await connectPinned(input);
      try {
        if (input.afterCloudInit) await cloudInitDone(conn, out, input);
        const code = await keepAlive(() =>
          execOnGuest(conn, 'sudo bash -s', {
            stdin: script,
            signal: ctx.cancellationSignal,
            onLine: (line) => out.line(line),
          }),
        );
        if (code !== 0) throw failure('InitScriptError', `init script exited with code ${code}`);
        // A template is sealed and shut down, a clone boots the template's kernel: only a
        // full run asks whether the guest must reboot.
        if (input.phase !== undefined) return {};
        let said = '';
        const checked = await execOnGuest(conn, 'sh -s', {
          stdin: REBOOT_NEED_SCRIPT,
          signal: ctx.cancellationSignal,
          onLine: (line, stream) => {
            if (stream === 'stdout') said += `${line}\n`;
          },
        });
        return { reboot: parseRebootNeed(said, checked) };
      } finally {
        conn.end();
        await out.close();
      }
    },

    /** The service's own public key (SSH_KEY_PATH): every VM trusts it, so the service can log in. */
    async servicePublicKey(): Promise<string> {
      return ensureSshKey(config.sshKeyPath).publicKey;
    },
  };
}
