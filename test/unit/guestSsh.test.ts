import net from 'node:net';
import { connectGuest } from '../../lib/guestSsh';
import { userKeyPair } from '../support/guest';

/**
 * A guest's SSH port forwarded by QEMU's user network accepts a connection before the
 * guest's sshd listens, then drops it: ssh2 reports that as an error more than once.
 * The second one once crashed the whole service (an 'error' event with no listener).
 */
test('a port that accepts and drops fails the connect, and a later error on it is not left unhandled', async () => {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    // Some bytes that are no SSH banner, then a reset: the path that emits twice.
    setTimeout(() => s.destroy(), 50);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const unhandled: unknown[] = [];
  const onUncaught = (err: unknown) => unhandled.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    for (const timeoutMs of [20, 2000]) {
      await expect(connectGuest({ host: '127.0.0.1', port, username: 'debian', privateKey: Buffer.from(userKeyPair().privateKey) }, timeoutMs)).rejects.toThrow();
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(unhandled).toEqual([]);
  } finally {
    process.off('uncaughtException', onUncaught);
    server.close();
  }
});

/**
 * sshd without host keys (a guest sealed for cloning, before cloud-init made new ones)
 * sends its banner and closes: ssh2 then emits 'close' and no error, and a connect that
 * waited for one never settled.
 */
test('a server that sends its banner and closes before the key exchange fails the connect at once', async () => {
  const server = net.createServer((s) => s.end('SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const started = Date.now();
    await expect(connectGuest({ host: '127.0.0.1', port, username: 'debian', privateKey: Buffer.from(userKeyPair().privateKey) }, 30_000)).rejects.toThrow(
      /closed the connection before the handshake|Connection lost before handshake/,
    );
    // Not the ready timeout: the close itself ended it.
    expect(Date.now() - started).toBeLessThan(10_000);
  } finally {
    server.close();
  }
});
