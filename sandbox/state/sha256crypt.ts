import { randomBytes } from 'node:crypto';

/**
 * SHA-256 crypt as PVE::Tools::encrypt_pw stores it for `qm set --cipassword`, and what
 * cloud-init hands to the guest's /etc/shadow: the service's own implementation, so the
 * sandbox writes real, verifiable hashes and cannot agree with the service on a wrong one.
 */
export { sha256Crypt } from '../../lib/proxmox/cipassword';

/** An 8-character salt from the alphabet encrypt_pw's sha1_base64 produces ('+' -> 'X'). */
export function newSalt(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789X/';
  return [...randomBytes(8)].map((v) => alphabet[v & 63]).join('');
}

/** Values that already are crypt hashes are stored as given (qemu-server's check). */
export function looksHashed(value: string): boolean {
  return /^\$(?:[156]|2[ay])(\$.+){2}/.test(value);
}
