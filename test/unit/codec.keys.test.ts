import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveEncryptionKeys } from '../../lib/temporal/encryptionKeys';

const b64 = (buf: Buffer) => buf.toString('base64');

describe('resolveEncryptionKeys', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-keys-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('with nothing configured, creates <dataDir>/encryption.key mode 0600, then reuses it', () => {
    const dataDir = path.join(dir, 'data');
    const first = resolveEncryptionKeys({ dataDir });
    const file = path.join(dataDir, 'encryption.key');
    expect(first.created).toBe(file);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(first.keys.size).toBe(1);
    expect(first.keys.get(first.encryptWith)).toHaveLength(32);

    const second = resolveEncryptionKeys({ dataDir, keys: '', keyFile: '' });
    expect(second.created).toBeUndefined();
    expect(second.encryptWith).toBe(first.encryptWith);
    expect(second.keys.get(second.encryptWith)!.equals(first.keys.get(first.encryptWith)!)).toBe(true);
  });

  test('refuses an existing key file that group or others can read', () => {
    resolveEncryptionKeys({ dataDir: dir });
    const file = path.join(dir, 'encryption.key');
    fs.chmodSync(file, 0o644);
    expect(() => resolveEncryptionKeys({ dataDir: dir })).toThrow(/encryption\.key is accessible by group or others \(mode 644\).*chmod 600/);
    fs.chmodSync(file, 0o640);
    expect(() => resolveEncryptionKeys({ dataDir: dir })).toThrow(/mode 640/);
  });

  test('ENCRYPTION_KEYS: the first encrypts, all decrypt', () => {
    const a = crypto.randomBytes(32);
    const b = crypto.randomBytes(32);
    const r = resolveEncryptionKeys({ dataDir: dir, keys: ` new:${b64(a)} , old.1:${b64(b)}` });
    expect(r.encryptWith).toBe('new');
    expect([...r.keys.keys()]).toEqual(['new', 'old.1']);
    expect(r.keys.get('old.1')!.equals(b)).toBe(true);
    // Nothing is written to DATA_DIR when keys are configured.
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  test('ENCRYPTION_KEYS errors name the setting and the entry, never the key', () => {
    const good = `k1:${b64(crypto.randomBytes(32))}`;
    const short = b64(crypto.randomBytes(16));
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: `${good},k2:${short}` })).toThrow(/ENCRYPTION_KEYS entry 2: key "k2" must be base64 of exactly 32 bytes \(got 16 bytes\)/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: `${good},k2:${short}` })).not.toThrow(short.slice(0, 10));
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: 'bad id:AAAA' })).toThrow(/ENCRYPTION_KEYS entry 1: key id "bad id" must match/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: 'nocolon' })).toThrow(/ENCRYPTION_KEYS entry 1: expected "<id>:<base64/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: `${good},${good}` })).toThrow(/ENCRYPTION_KEYS entry 2: key id "k1" appears twice/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: 'k1:not*base64' })).toThrow(/invalid base64/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: ' , ' })).toThrow(/ENCRYPTION_KEYS: no keys given/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: `${'x'.repeat(65)}:${b64(crypto.randomBytes(32))}` })).toThrow(/must match/);
  });

  test('ENCRYPTION_KEY_FILE: one key a line, # comments, must be private', () => {
    const a = crypto.randomBytes(32);
    const b = crypto.randomBytes(32);
    const file = path.join(dir, 'keys.txt');
    fs.writeFileSync(file, `# rotated 2026-10\n\nk2:${b64(a)}  # current\nk1:${b64(b)}\n`, { mode: 0o600 });
    const r = resolveEncryptionKeys({ dataDir: dir, keyFile: file });
    expect(r.encryptWith).toBe('k2');
    expect([...r.keys.keys()]).toEqual(['k2', 'k1']);
    expect(r.created).toBeUndefined();

    fs.writeFileSync(file, `k2:${b64(a)}\nk1:short\n`);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keyFile: file })).toThrow(/ENCRYPTION_KEY_FILE .*keys\.txt line 2: key "k1"/);
    fs.chmodSync(file, 0o604);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keyFile: file })).toThrow(/ENCRYPTION_KEY_FILE: .*keys\.txt is accessible by group or others/);
    expect(() => resolveEncryptionKeys({ dataDir: dir, keyFile: path.join(dir, 'missing') })).toThrow(/ENCRYPTION_KEY_FILE: .*missing does not exist/);
  });

  test('both settings at once are refused', () => {
    expect(() => resolveEncryptionKeys({ dataDir: dir, keys: 'k:x', keyFile: '/x' })).toThrow(/both set/);
  });
});
