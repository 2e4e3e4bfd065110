import { createHash } from 'node:crypto';
import { ImageChecksumError, ImageDownloadError } from './errors';
import { discardPart, loadPart, PartWriter, writeRecord } from './part';
import type { ExpectedChecksum } from './remote';
import { describe, failFor, request } from './remote';

/**
 * Downloads one URL into `<part>`, resuming what an earlier attempt left there (Range +
 * If-Range), hashing as bytes arrive, and verifying the result. It never touches the final
 * name: the caller renames a verified part. A cut transfer leaves the part for the next
 * attempt; a checksum mismatch deletes it.
 */

export interface TransferOptions {
  url: string;
  partPath: string;
  expected: ExpectedChecksum;
  signal: AbortSignal;
  /** Fail, retryably, when no byte arrives for this long (a stalled connection). */
  idleTimeoutMs: number;
  onProgress: (receivedBytes: number, totalBytes: number | undefined, final?: boolean) => void;
}

export interface TransferResult {
  hex: string;
  bytes: number;
  /** The transfer continued an existing part. */
  resumed: boolean;
}

export async function transfer(opts: TransferOptions): Promise<TransferResult> {
  const { url, partPath, expected, signal } = opts;
  let { hash, offset, record } = await loadPart(partPath, url, expected, signal);

  // A part that is already complete (crash between verify and rename) needs no request.
  if (offset > 0 && hash.copy().digest('hex') === expected.hex) {
    opts.onProgress(offset, offset, true);
    return { hex: expected.hex, bytes: offset, resumed: true };
  }

  // One idle timer covers the wait for headers and every gap between chunks.
  const idle = new AbortController();
  const combined = AbortSignal.any([signal, idle.signal]);
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(
      () => idle.abort(new ImageDownloadError(`${url}: no data for ${opts.idleTimeoutMs} ms`, url)),
      opts.idleTimeoutMs,
    );
  };
  armIdle();
  try {
    const headers: Record<string, string> = { 'accept-encoding': 'identity' };
    if (offset > 0) {
      headers.range = `bytes=${offset}-`;
      if (record?.validator) headers['if-range'] = record.validator;
    }
    let res = await request(url, { headers, signal: combined });
    if (offset > 0 && res.status === 416) {
      // Our part reaches past the end of the file: it is not a prefix of this image.
      await res.body?.cancel().catch(() => undefined);
      await discardPart(partPath);
      hash = createHash(expected.algorithm);
      offset = 0;
      res = await request(url, { headers: { 'accept-encoding': 'identity' }, signal: combined });
    }
    if (!res.ok) return await failFor(url, res);
    if (!res.body) throw new ImageDownloadError(`${url} answered without a body`, url);

    if (res.status === 206) {
      const range = parseContentRange(res.headers.get('content-range'));
      if (offset === 0 || !range || range.start !== offset) {
        await res.body.cancel().catch(() => undefined);
        await discardPart(partPath);
        throw new ImageDownloadError(`${url} answered an unexpected range (${res.headers.get('content-range')})`, url);
      }
      const writer = new PartWriter(partPath, true);
      return await receive(opts, res.body, writer, { hash, offset, total: range.total, resumed: true }, armIdle, combined);
    }
    // 200: a fresh download, or the server ignored our Range, or If-Range said the file
    // changed: start over from zero. Reading starts now; the record and the truncation of
    // the part happen while the first chunks queue (see PartWriter).
    const length = Number(res.headers.get('content-length') ?? NaN);
    const ready = writeRecord(partPath, { url, algorithm: expected.algorithm, hex: expected.hex, validator: validatorOf(res) });
    const writer = new PartWriter(partPath, false, ready);
    const total = Number.isFinite(length) ? length : undefined;
    return await receive(opts, res.body, writer, { hash: createHash(expected.algorithm), offset: 0, total, resumed: false }, armIdle, combined);
  } finally {
    clearTimeout(idleTimer);
  }
}

interface Receiving {
  hash: ReturnType<typeof createHash>;
  offset: number;
  total: number | undefined;
  resumed: boolean;
}

/** Reads the body into the part, then verifies the digest. */
async function receive(
  opts: TransferOptions,
  body: ReadableStream<Uint8Array>,
  writer: PartWriter,
  r: Receiving,
  armIdle: () => void,
  signal: AbortSignal,
): Promise<TransferResult> {
  const { url, partPath, expected } = opts;
  let received = r.offset;
  opts.onProgress(received, r.total);
  try {
    for await (const chunk of body) {
      armIdle();
      r.hash.update(chunk);
      received += chunk.length;
      await writer.write(chunk);
      opts.onProgress(received, r.total);
    }
    await writer.finish();
  } catch (err) {
    await writer.abandon();
    // Aborted by the caller or by the idle timer: surface that reason, not the stream's.
    signal.throwIfAborted();
    if (writer.error) throw writer.error;
    throw new ImageDownloadError(`download of ${url} interrupted at ${received} bytes: ${describe(err)}`, url, { cause: err });
  }

  const hex = r.hash.digest('hex');
  if (hex !== expected.hex) {
    await discardPart(partPath);
    throw new ImageChecksumError(url, expected.hex, hex);
  }
  opts.onProgress(received, r.total ?? received, true);
  return { hex, bytes: received, resumed: r.resumed };
}

/** If-Range accepts a strong ETag or a date; a weak ETag would never match. */
function validatorOf(res: Response): string | undefined {
  const etag = res.headers.get('etag');
  if (etag && !etag.startsWith('W/')) return etag;
  return res.headers.get('last-modified') ?? undefined;
}

function parseContentRange(value: string | null): { start: number; total: number | undefined } | undefined {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value?.trim() ?? '');
  if (!m) return undefined;
  return { start: Number(m[1]), total: m[3] === '*' ? undefined : Number(m[3]) };
}
