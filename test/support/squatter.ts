import { Server, utils } from 'ssh2';
import { generateEd25519 } from '../../sandbox/sshKeys';
import { fingerprint } from '../../lib/guestHostKey';

/**
 * An SSH server squatting on a VM's address with a key of its own: it lets anyone in and
 * records what each client sent it (authentications, commands, stdin), as a machine on
 * the VM network that wants the install's secrets would.
 */
export interface Squatter {
  /** Its host key as a `.pub` line, and that key's fingerprint. */
  publicKey: string;
  fingerprint: string;
  /** The port it listens on (given, or the one picked for port 0). */
  port: number;
  connections: number;
  authentications: string[];
  commands: string[];
  received: string;
  close(): Promise<void>;
}

export async function startSquatter(host: string, port: number): Promise<Squatter> {
  const key = generateEd25519('squatter');
  const parsed = utils.parseKey(key.private);
  if (parsed instanceof Error || Array.isArray(parsed)) throw new Error('squatter key');
  const s: Squatter = {
    publicKey: `${parsed.type} ${parsed.getPublicSSH().toString('base64')} squatter`,
    fingerprint: fingerprint(parsed.getPublicSSH()),
    port,
    connections: 0,
    authentications: [],
    commands: [],
    received: '',
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = new Server({ hostKeys: [key.private], ident: 'OpenSSH_9.2p1 Debian-2+deb12u3' }, (client) => {
    s.connections++;
    client.on('error', () => undefined);
    client.on('authentication', (ctx) => {
      s.authentications.push(`${ctx.username}/${ctx.method}`);
      ctx.accept();
    });
    client.on('session', (accept) => {
      accept().on('exec', (acceptExec, _reject, info) => {
        s.commands.push(info.command);
        const channel = acceptExec();
        channel.on('data', (d: Buffer) => (s.received += d.toString('utf8')));
        channel.on('end', () => {
          channel.exit(0);
          channel.end();
        });
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  s.port = (server.address() as { port: number }).port;
  return s;
}
