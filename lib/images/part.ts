import { createHash, type Hash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { hashFile } from './hash';
import type { ExpectedChecksum } from './remote';

/**
 * The partial download `<image>.part` and its record `<image>.part.json`, which says which
 * URL, checksum and server version (ETag / Last-Modified) the bytes belong to. Debian's
 * `latest/` moves: without the record, a part of last week's image would be finished with
 * this week's bytes and fail only at the end.
 */

export interface PartRecord {
  url: string;
  algorithm: string;
  hex: string;
  /** If-Range validator: a strong ETag, else Last-Modified. */
  validator?: string;
}

export interface LoadedPart {
  /** Hash of the bytes already there, still open for what follows. */
  hash: Hash;
  offset: number;
  record: PartRecord | undefined;
}

/** Hashes a part that can be resumed, or clears one that belongs to another image version. */
export async function loadPart(partPath: string, url: string, expected: ExpectedChecksum, signal: AbortSignal): Promise<LoadedPart> {
  const record = await readRecord(partPath);
  const size = await fs.stat(partPath).then((s) => s.size, () => 0);
  const matches = record?.url === url && record.algorithm === expected.algorithm && record.hex === expected.hex;
  if (size === 0 || !matches) {
    await discardPart(partPath);
    return { hash: createHash(expected.algorithm), offset: 0, record: undefined };
  }
  try {
    const { hash, bytes } = await hashFile(partPath, expected.algorithm, signal);
    return { hash, offset: bytes, record };
  } catch (err) {
    signal.throwIfAborted();
    throw err;
  }
}

export async function discardPart(partPath: string): Promise<void> {
  await Promise.all([fs.rm(partPath, { force: true }), fs.rm(recordPath(partPath), { force: true })]);
}

export async function writeRecord(partPath: string, record: PartRecord): Promise<void> {
  await fs.writeFile(recordPath(partPath), JSON.stringify(record));
}

export function recordPath(partPath: string): string {
  return `${partPath}.json`;
}

async function readRecord(partPath: string): Promise<PartRecord | undefined> {
  try {
    return JSON.parse(await fs.readFile(recordPath(partPath), 'utf8')) as PartRecord;
  } catch {
    return undefined;
  }
}

/** Bytes accepted ahead of the disk before `write` makes the caller wait. */
const MAX_UNWRITTEN = 8 * 1024 * 1024;

/**
 * Appends chunks to the part in order without making the network reader wait for the disk
 * (up to MAX_UNWRITTEN). That matters: a fetch body that errors drops the chunks still
 * queued in it, so a reader that keeps up loses nothing that arrived before a cut. The file
 * is opened after `ready` (e.g. the record being written), while chunks already queue.
 */
export class PartWriter {
  private chain: Promise<unknown>;
  private readonly file: Promise<fs.FileHandle>;
  private unwritten = 0;
  private failure: unknown;

  constructor(partPath: string, append: boolean, ready: Promise<unknown> = Promise.resolve()) {
    this.file = ready.then(() => fs.open(partPath, append ? 'a' : 'w'));
    this.chain = this.file;
    this.watch();
  }

  /** Queues a chunk; resolves at once unless the disk has fallen too far behind. */
  async write(chunk: Uint8Array): Promise<void> {
    if (this.failure) throw this.failure;
    this.unwritten += chunk.length;
    this.chain = this.chain.then(async () => {
      await (await this.file).write(chunk);
      this.unwritten -= chunk.length;
    });
    this.watch();
    if (this.unwritten > MAX_UNWRITTEN) await this.chain;
  }

  /** Everything written and on disk (fsync: the rename that follows must not publish bytes
   * that are only in the page cache), file closed. */
  async finish(): Promise<void> {
    try {
      await this.chain;
      await (await this.file).sync();
    } finally {
      await this.close();
    }
  }

  /** Keeps what was queued (the next attempt resumes from it), closes the file. */
  async abandon(): Promise<void> {
    await this.chain.catch(() => undefined);
    await this.close();
  }

  /** A disk error (e.g. ENOSPC) met while writing, if any. */
  get error(): unknown {
    return this.failure;
  }

  private watch(): void {
    // Marks the chain handled while nobody awaits it; the error is kept and rethrown.
    this.chain.catch((err: unknown) => {
      this.failure ??= err;
    });
  }

  private async close(): Promise<void> {
    const fh = await this.file.catch(() => undefined);
    await fh?.close().catch(() => undefined);
  }
}
