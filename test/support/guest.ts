import { connectGuest, execOnGuest } from '../../lib/guestSsh';

/** Whether the guest at `ip` lets `user` in with `privateKey` and runs a command. */
export async function sshWorks(ip: string, port: number, user: string, privateKey: Buffer): Promise<boolean> {
  try {
    const conn = await connectGuest({ host: ip, port, username: user, privateKey }, 5000);
    try {
      return (await execOnGuest(conn, 'true')) === 0;
    } finally {
      conn.end();
    }
  } catch {
    return false;
  }
}
