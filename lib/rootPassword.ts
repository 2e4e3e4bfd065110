import { cryptSalt, sha256Crypt } from './proxmox/cipassword';

/**
 * Rounds for the root password's hash: it goes to the VM over SSH, and should the VM's
 * address ever be answered by someone else, what they get must be slow to guess from.
 * A fraction of a second here, once per install.
 */
export const ROOT_PASSWORD_ROUNDS = 100_000;

/**
 * The root password as the init script sets it (`chpasswd -e`): SHA-256 crypt, which the
 * libcrypt of every supported OS verifies (Proxmox stores the cloud-init password so too).
 */
export function hashRootPassword(password: string): string {
  return sha256Crypt(password, cryptSalt(), ROOT_PASSWORD_ROUNDS);
}
