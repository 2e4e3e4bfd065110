import { createHash } from 'node:crypto';
import { utils } from 'ssh2';

/**
 * A guest's SSH host public key, as a `.pub` file holds it (`ssh-ed25519 AAAA… comment`).
 * The key is what the guest made on its first boot; QemuRun learns it through a channel
 * Proxmox vouches for (the guest agent) and accepts no other key at the VM's address.
 */
export interface HostKey {
  /** `ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`… */
  type: string;
  /** The key blob the SSH server signs with, as it appears on the wire. */
  blob: Buffer;
}

export function parseHostKey(line: string): HostKey {
  const [type, b64] = line.trim().split(/\s+/);
  const parsed = type && b64 ? utils.parseKey(`${type} ${b64}`) : new Error('not a public key line');
  if (parsed instanceof Error || Array.isArray(parsed) || parsed.isPrivateKey()) {
    throw new Error(`not an SSH public key: '${line.trim().slice(0, 40)}'`);
  }
  return { type, blob: parsed.getPublicSSH() };
}

/** The line form, without the guest's comment: what a pinned key is carried as. */
export function hostKeyLine(key: HostKey): string {
  return `${key.type} ${key.blob.toString('base64')}`;
}

/** `SHA256:…`, as `ssh-keygen -lf` and OpenSSH's prompts show a key. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** The host key algorithms that prove possession of `key` (an RSA key signs with three). */
export function hostKeyAlgorithms(key: HostKey): string[] {
  return key.type === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [key.type];
}
