import { generateKeyPairSync, randomBytes } from 'node:crypto';

/**
 * Ed25519 key pairs in OpenSSH's formats, for guest host keys and test keys.
 *
 * Why not ssh2's utils.generateKeyPairSync: it strips leading zero bytes from the public
 * key (mscdex/ssh2#1390), so about one key in 256 is 31 bytes long and unreadable, by
 * ssh2 itself and by OpenSSH. A guest whose host key was one of those never started its
 * sshd, and an install waiting for it failed now and then. Node's crypto makes the key;
 * this only writes it out.
 */
export interface Ed25519Pair {
  /** `-----BEGIN OPENSSH PRIVATE KEY-----` ... (unencrypted), as ssh-keygen writes it. */
  private: string;
  /** `ssh-ed25519 AAAA... comment` */
  public: string;
}

function sshString(data: Buffer | string): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const len = Buffer.alloc(4);
  len.writeUInt32BE(bytes.length);
  return Buffer.concat([len, bytes]);
}

function uint32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

export function generateEd25519(comment = ''): Ed25519Pair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const pub = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const seed = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url');
  const publicBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(pub)]);

  // PROTOCOL.key: two equal check words, the key, its comment, then 1, 2, 3... up to the
  // cipher's block size (8 for "none").
  const check = randomBytes(4).readUInt32BE();
  let secret = Buffer.concat([
    uint32(check),
    uint32(check),
    sshString('ssh-ed25519'),
    sshString(pub),
    sshString(Buffer.concat([seed, pub])),
    sshString(comment),
  ]);
  const pad = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);

  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0'),
    sshString('none'),
    sshString('none'),
    sshString(''),
    uint32(1),
    sshString(publicBlob),
    sshString(secret),
  ]).toString('base64');
  const lines = body.match(/.{1,70}/g)!.join('\n');
  return {
    private: `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines}\n-----END OPENSSH PRIVATE KEY-----\n`,
    public: `ssh-ed25519 ${publicBlob.toString('base64')}${comment ? ` ${comment}` : ''}`,
  };
}
