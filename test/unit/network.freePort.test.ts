import net from 'node:net';
import { freePort } from '../../lib/network';

/**
 * freePort is the port a test, the benchmark or the dev server binds next: one nothing
 * listens on at the moment it is asked for, on the host asked about.
 */
test('freePort gives a loopback port that can be listened on at once', async () => {
  const port = await freePort();
  expect(port).toBeGreaterThan(0);
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', resolve);
  });
  await new Promise((resolve) => srv.close(resolve));
});
