import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { ChecksumAlgorithm } from './catalog';

/**
 * Feeds a file into a hash and returns the hash still open, so a resumed download can
 * keep hashing the bytes that follow without reading the file twice.
 */
export async function hashFile(path: string, algorithm: ChecksumAlgorithm, signal?: AbortSignal): Promise<{ hash: Hash; bytes: number }> {
  const hash = createHash(algorithm);
  let bytes = 0;
  for await (const chunk of createReadStream(path, { signal, highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { hash, bytes };
}

/** Hex digest of a whole file. */
export async function digestFile(path: string, algorithm: ChecksumAlgorithm, signal?: AbortSignal): Promise<{ hex: string; bytes: number }> {
  const { hash, bytes } = await hashFile(path, algorithm, signal);
  return { hex: hash.digest('hex'), bytes };
}
