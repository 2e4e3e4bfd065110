import { connectGuest, execOnGuest } from '../../lib/guestSsh';
import { sha256Crypt } from '../../sandbox/state/sha256crypt';
import { generateEd25519 } from '../../sandbox/sshKeys';

/** Runs `command` in the guest at `ip` as `user`, logging in with `privateKey`; its exit code. */
export async function runInGuest(ip: string, port: number, user: string, privateKey: Buffer, command: string): Promise<number> {
  const conn = await connectGuest({ host: ip, port, username: user, privateKey }, 5000);
  try {
    return await execOnGuest(conn, command);
  } finally {
    conn.end();
  }
}

/** Whether the guest at `ip` lets `user` in with `privateKey` and runs a command. */
export async function sshWorks(ip: string, port: number, user: string, privateKey: Buffer): Promise<boolean> {
  return runInGuest(ip, port, user, privateKey, 'true').then(
    (code) => code === 0,
    () => false,
  );
}

/** Whether a VM config's cloud-init password hash (sha256-crypt) is that of `password`. */
export function cipasswordMatches(conf: string, password: string): boolean {
  const hash = /^cipassword: (\$5\$.*)$/m.exec(conf)?.[1];
  return hash !== undefined && sha256Crypt(password, hash.split('$')[2]) === hash;
}

/** A user's key pair, as a request's `pubkey` and the matching private key. */
export function userKeyPair(comment = 'user@laptop'): { publicKey: string; privateKey: Buffer } {
  const pair = generateEd25519(comment);
  return { publicKey: pair.public, privateKey: Buffer.from(pair.private) };
}
