import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { guestActivities, GUEST_HOST_KEY_FILE } from '../../activities/guest';
import type { Config } from '../../lib/config';
import type { PinnedHostKey } from '../../contract';
import type { ProxmoxCluster } from '../../lib/proxmox';
import { startSquatter, type Squatter } from '../support/squatter';

/**
 * waitForSsh's host key policy against SSH servers on loopback, with the guest agent's
 * answer (through Proxmox) played by a stand-in: the agent's key is the only one accepted;
 * a guest whose agent stays silent is trusted on first use, and that key stays pinned.
 */

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-pinning-'));
const servers: Squatter[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function server(): Promise<Squatter> {
  const s = await startSquatter('127.0.0.1', 0);
  servers.push(s);
  return s;
}

/** The activities against `port`, with `agent` answering file-read for VM 120. */
function activities(port: number, agent: () => string) {
  const config = { sshKeyPath: path.join(dataDir, 'id_ed25519'), vmSshPort: port, sshWaitTimeoutSec: 30, guestAgentWaitSec: 0 } as Config;
  const node = {
    agentFileRead: async (vmid: number, file: string) => {
      expect({ vmid, file }).toEqual({ vmid: 120, file: GUEST_HOST_KEY_FILE });
      return agent();
    },
  };
  const proxmox = { nodeOf: async () => node } as unknown as ProxmoxCluster;
  return guestActivities({ config, proxmox, client: undefined as never });
}

const notRunning = () => {
  throw new Error('QEMU guest agent is not running');
};

test("the guest agent's key is the one pinned, and the VM's server is logged into once", async () => {
  const guest = await server();
  const pinned = await new MockActivityEnvironment().run(() => activities(guest.port, () => `${guest.publicKey}\n`).waitForSsh({ ip: '127.0.0.1', user: 'debian', vmid: 120 }));
  expect(pinned).toEqual({ hostKey: guest.publicKey.replace(/ squatter$/, ''), source: 'guest agent', fingerprint: guest.fingerprint });
  expect(guest.commands).toEqual(['true']);
});

test("a server with another key than the agent's gets no login and the wait fails naming both keys", async () => {
  const [vm, squatter] = [await server(), await server()];
  const waiting = new MockActivityEnvironment().run(() => activities(squatter.port, () => vm.publicKey).waitForSsh({ ip: '127.0.0.1', user: 'debian', vmid: 120 }));
  await expect(waiting).rejects.toMatchObject({
    type: 'HostKeyMismatchError',
    nonRetryable: true,
    message: expect.stringContaining(`presented host key ${squatter.fingerprint}, not the VM's ${vm.fingerprint} (reported by VM 120's guest agent)`),
  });
  expect({ authentications: squatter.authentications, commands: squatter.commands }).toEqual({ authentications: [], commands: [] });
});

test('without an agent the first key is trusted only after a look that sends no login, then held', async () => {
  const guest = await server();
  const first = await new MockActivityEnvironment().run(
    (): Promise<PinnedHostKey | undefined> => activities(guest.port, notRunning).waitForSsh({ ip: '127.0.0.1', user: 'debian', vmid: 120 }),
  );
  expect(first).toMatchObject({ source: 'first use', fingerprint: guest.fingerprint });
  // One handshake without authentication to learn the key, then one pinned login.
  expect(guest.connections).toBe(2);
  expect(guest.commands).toEqual(['true']);

  // After the reboot another server answers: the key pinned at first use refuses it.
  const other = await server();
  const again = new MockActivityEnvironment().run(() => activities(other.port, notRunning).waitForSsh({ ip: '127.0.0.1', user: 'debian', vmid: 120, hostKey: first!.hostKey }));
  await expect(again).rejects.toMatchObject({ type: 'HostKeyMismatchError' });
  expect(other.authentications).toEqual([]);
});

test('an agent that answers later with another key than the one trusted on first use fails the wait', async () => {
  const [guest, squatter] = [await server(), await server()];
  const waiting = new MockActivityEnvironment().run(() =>
    activities(guest.port, () => guest.publicKey).waitForSsh({ ip: '127.0.0.1', user: 'debian', vmid: 120, hostKey: squatter.publicKey }),
  );
  await expect(waiting).rejects.toMatchObject({
    type: 'HostKeyMismatchError',
    message: `VM 120's guest agent reports host key ${guest.fingerprint}, not the ${squatter.fingerprint} SSH at 127.0.0.1 showed before`,
  });
});
