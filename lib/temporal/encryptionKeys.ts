import crypto from 'node:crypto';
import fs from 'node:fs';
import { assertPrivateFile } from '../privateFile';
import path from 'node:path';

/**
 * Where the payload-encryption keys come from. Order of precedence:
 *   ENCRYPTION_KEYS      "<id>:<base64 32 bytes>,<id>:<base64>,…"
 *   ENCRYPTION_KEY_FILE  the same entries, one per line, '#' starts a comment
 *   neither              <DATA_DIR>/encryption.key, created with one random key on first start
 * The first entry encrypts; the others only decrypt, which is how a key is rotated: put the
 * new key first and keep the old one after it until no retained history needs it.
 *
 * Errors name the setting and the entry, never the key material.
 */

const DEFAULT_KEY_FILE_NAME = 'encryption.key';
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;
const KEY_BYTES = 32;

export interface EncryptionKeyOptions {
  /** ENCRYPTION_KEYS. An empty string counts as unset. */
  keys?: string;
  /** ENCRYPTION_KEY_FILE. An empty string counts as unset. */
  keyFile?: string;
  /** DATA_DIR: home of the generated key file when neither setting is given. */
  dataDir: string;
}

export interface ResolvedEncryptionKeys {
  keys: Map<string, Buffer>;
  encryptWith: string;
  /** Set only when this call generated the key file: worth a log line telling to back it up. */
  created?: string;
}

interface Entry {
  text: string;
  /** Where it came from, for error messages: "ENCRYPTION_KEYS entry 2". */
  where: string;
}

function parseEntries(entries: Entry[], setting: string): Omit<ResolvedEncryptionKeys, 'created'> {
  if (entries.length === 0) throw new Error(`${setting}: no keys given; expected "<id>:<base64 of ${KEY_BYTES} bytes>"`);
  const keys = new Map<string, Buffer>();
  for (const { text, where } of entries) {
    const colon = text.indexOf(':');
    if (colon < 0) throw new Error(`${where}: expected "<id>:<base64 of ${KEY_BYTES} bytes>"`);
    const id = text.slice(0, colon).trim();
    const encoded = text.slice(colon + 1).trim();
    if (!KEY_ID.test(id)) throw new Error(`${where}: key id "${id.slice(0, 80)}" must match ${KEY_ID.source}`);
    if (keys.has(id)) throw new Error(`${where}: key id "${id}" appears twice`);
    // Buffer.from skips characters that are not base64, so check the alphabet first.
    const key = BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
    if (!key || key.length !== KEY_BYTES) {
      throw new Error(`${where}: key "${id}" must be base64 of exactly ${KEY_BYTES} bytes (got ${key ? `${key.length} bytes` : 'invalid base64'}); make one with: openssl rand -base64 32`);
    }
    keys.set(id, key);
  }
  return { keys, encryptWith: entries[0].text.slice(0, entries[0].text.indexOf(':')).trim() };
}

function parseList(value: string): Omit<ResolvedEncryptionKeys, 'created'> {
  const entries = value
    .split(',')
    .map((text, i) => ({ text: text.trim(), where: `ENCRYPTION_KEYS entry ${i + 1}` }))
    .filter((e) => e.text !== '');
  return parseEntries(entries, 'ENCRYPTION_KEYS');
}

function assertPrivate(file: string, setting: string): void {
  assertPrivateFile(file, setting, 'can read all workflow history');
}

function readKeyFile(file: string, setting: string): Omit<ResolvedEncryptionKeys, 'created'> {
  try {
    assertPrivate(file, setting);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`${setting}: ${file} does not exist`);
    throw err;
  }
  const entries = fs
    .readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .map((line, i) => ({ text: line.replace(/#.*/, '').trim(), where: `${setting} ${file} line ${i + 1}` }))
    .filter((e) => e.text !== '');
  return parseEntries(entries, `${setting} ${file}`);
}

function newKeyId(): string {
  const day = new Date().toISOString().slice(0, 10).replace(/-/g, '');
  return `key-${day}-${crypto.randomBytes(3).toString('hex')}`;
}

/**
 * Writes a new key file, or returns false if one appeared first. The file is written
 * under a temporary name and hard-linked into place, so a second process starting at
 * the same moment (API and worker) either wins or reads a complete file, never half of one.
 */
function createKeyFile(file: string): boolean {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  const content =
    '# QemuRun payload-encryption keys: "<id>:<base64 of 32 bytes>", one per line; the first encrypts.\n' +
    '# Losing this file makes encrypted workflow history unreadable: back it up with the database.\n' +
    `${newKeyId()}:${crypto.randomBytes(KEY_BYTES).toString('base64')}\n`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeFileSync(fd, content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

export function resolveEncryptionKeys(opts: EncryptionKeyOptions): ResolvedEncryptionKeys {
  const keys = opts.keys?.trim() || undefined;
  const keyFile = opts.keyFile?.trim() || undefined;
  // Two sources could silently disagree about which key encrypts; make the operator choose.
  if (keys && keyFile) throw new Error('ENCRYPTION_KEYS and ENCRYPTION_KEY_FILE are both set; set only one');
  if (keys) return parseList(keys);
  if (keyFile) return readKeyFile(path.resolve(keyFile), 'ENCRYPTION_KEY_FILE');

  const file = path.resolve(opts.dataDir, DEFAULT_KEY_FILE_NAME);
  const created = !fs.existsSync(file) && createKeyFile(file);
  const resolved = readKeyFile(file, `key file (DATA_DIR/${DEFAULT_KEY_FILE_NAME})`);
  return created ? { ...resolved, created: file } : resolved;
}
