import { Context, sleep } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { connectGuest, execOnGuest } from '../lib/guestSsh';
import { ensureSshKey } from '../lib/sshKey';
import { initScriptEnv, initScriptFor } from '../lib/initScripts';
import { shellQuote } from '../lib/executor/quote';
import { outputStream } from './output';
import { keepAlive } from './keepAlive';
import { checkedInput } from './checkInput';
import { failure, field } from '../contract';

export interface GuestDeps {
  config: Config;
  client: Client;
}

/** Activities that talk to the VM itself over SSH, with the key every VM trusts. */
export function guestActivities({ config, client }: GuestDeps) {
  const key = () => ensureSshKey(config.sshKeyPath).privateKey;

  return {
    /** Polls until the guest accepts the main node's key; cloud-init may take minutes. */
    async waitForSsh(input: { ip: string; user: string }): Promise<void> {
      const ctx = Context.current();
      const deadline = Date.now() + config.sshWaitTimeoutSec * 1000;
      let lastError = 'no answer';
      for (let attempt = 1; Date.now() < deadline; attempt++) {
        ctx.heartbeat({ attempt });
        try {
          const conn = await connectGuest({ host: input.ip, port: config.vmSshPort, username: input.user, privateKey: key() }, 5000);
          try {
            const code = await execOnGuest(conn, 'true', { signal: ctx.cancellationSignal });
            if (code === 0) return;
            lastError = `probe command exited with ${code}`;
          } finally {
            conn.end();
          }
        } catch (err) {
          lastError = (err as Error).message;
        }
        await sleep(Math.min(5000, 500 * attempt));
      }
      // Waiting longer would not help; the workflow cleans up instead of retrying.
      throw failure(
        'SshTimeoutError',
        `SSH on ${input.ip}:${config.vmSshPort} did not answer for ${input.user} within ${config.sshWaitTimeoutSec}s: ${lastError}`,
      );
    },

    /**
     * Delivers the OS init script over the SSH session itself (the VM need not reach the
     * API) and streams its output. Settings and the root password travel in the script's
     * stdin, never on a command line. The script is safe to run twice, so a retry after
     * a dropped connection is harmless.
     */
    async runInitScript(input: { ip: string; user: string; os: string; version: string; rootPassword?: string }): Promise<void> {
      checkedInput(field.user, input.user, 'runInitScript');
      const ctx = Context.current();
      const env = initScriptEnv(config.initScript, input.rootPassword ?? config.rootPassword);
      const exports = Object.entries(env)
        .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
        .join('\n');
      const script = `${exports}\n${initScriptFor(input.os, input.version)}`;
      const out = outputStream(client, [input.rootPassword ?? '', config.rootPassword ?? '']);
      const conn = await connectGuest({ host: input.ip, port: config.vmSshPort, username: input.user, privateKey: key() });
      try {
        const code = await keepAlive(() =>
          execOnGuest(conn, 'sudo bash -s', {
            stdin: script,
            signal: ctx.cancellationSignal,
            onLine: (line) => out.line(line),
          }),
        );
        if (code !== 0) throw failure('InitScriptError', `init script exited with code ${code}`);
      } finally {
        conn.end();
        await out.close();
      }
    },

    /** The public key every VM trusts, so the service (and the main node) can log in. */
    async mainNodeKey(): Promise<string> {
      return ensureSshKey(config.sshKeyPath).publicKey;
    },
  };
}
