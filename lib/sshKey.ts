import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

export interface SshKeyPair {
  privateKeyPath: string;
  privateKey: Buffer;
  publicKey: string;
}

/**
 * The main node's SSH key: what the service logs into nodes and VMs with, and the key
 * injected into every VM. Like the seed, an existing ed25519, rsa or ecdsa key next to
 * the configured path is used; with none, an ed25519 pair is generated.
 */
export function ensureSshKey(keyPath: string): SshKeyPair {
  const dir = path.dirname(keyPath);
  const candidates = [keyPath, ...['id_ed25519', 'id_rsa', 'id_ecdsa'].map((n) => path.join(dir, n))];
  let found = candidates.find((p) => fs.existsSync(p) && fs.existsSync(`${p}.pub`));
  if (!found) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // ssh-keygen refuses to overwrite; a concurrent caller that won the race is fine.
    try {
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'qemurun', '-f', keyPath], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
    } catch (err) {
      if (!fs.existsSync(`${keyPath}.pub`)) throw err;
    }
    found = keyPath;
  }
  return {
    privateKeyPath: found,
    privateKey: fs.readFileSync(found),
    publicKey: fs.readFileSync(`${found}.pub`, 'utf8').trim(),
  };
}

/** The key type an SSH public key blob names: its first string (uint32 length + bytes). */
export function keyBlobType(blob: Buffer): string | undefined {
  if (blob.length < 4) return undefined;
  const len = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + len).toString('latin1');
}
