import type { ChecksumAlgorithm, ImageSource } from './catalog';
import { findChecksum } from './checksums';
import { ImageDownloadError, ImageNotFoundError } from './errors';

/**
 * HTTP with Node's built-in fetch, and the one place that decides which answers are worth
 * retrying: 4xx (bar 408/429) means the layout or the version is wrong; network errors
 * and 5xx are the server's or the network's passing trouble.
 */

export interface ExpectedChecksum {
  algorithm: ChecksumAlgorithm;
  hex: string;
}

/** fetch, with network failures turned into retryable errors and aborts left as they are. */
export async function request(url: string, init: RequestInit & { signal?: AbortSignal }): Promise<Response> {
  try {
    return await fetch(url, { redirect: 'follow', ...init });
  } catch (err) {
    init.signal?.throwIfAborted();
    throw new ImageDownloadError(`cannot reach ${url}: ${describe(err)}`, url, { cause: err });
  }
}

/** Throws the right error class for a non-2xx answer; the body is discarded. */
export async function failFor(url: string, res: Response): Promise<never> {
  await res.body?.cancel().catch(() => undefined);
  const s = res.status;
  if (s >= 400 && s < 500 && s !== 408 && s !== 429) {
    throw new ImageNotFoundError(`${url} answered ${s} ${res.statusText}`.trim(), url, s);
  }
  throw new ImageDownloadError(`${url} answered ${s} ${res.statusText}`.trim(), url);
}

/**
 * Reads the published checksum of `source` now. Fetched on every call on purpose: Debian's
 * `latest/` and Rocky's `.latest` names move, and the cache is only as good as this.
 */
export async function fetchExpectedChecksum(source: ImageSource, signal?: AbortSignal): Promise<ExpectedChecksum> {
  const res = await request(source.checksumUrl, { signal });
  if (!res.ok) return failFor(source.checksumUrl, res);
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    signal?.throwIfAborted();
    throw new ImageDownloadError(`reading ${source.checksumUrl} failed: ${describe(err)}`, source.checksumUrl, { cause: err });
  }
  const entry = findChecksum(text, source.fileName);
  if (!entry) {
    throw new ImageNotFoundError(`${source.checksumUrl} does not list ${source.fileName}`, source.checksumUrl);
  }
  const algorithm = entry.algorithm ?? source.algorithm;
  if (algorithm !== source.algorithm) {
    // A different algorithm than the distribution publishes means the file format changed
    // under us; refuse rather than verify against the wrong thing.
    throw new ImageNotFoundError(
      `${source.checksumUrl} lists ${source.fileName} with ${algorithm}, expected ${source.algorithm}`,
      source.checksumUrl,
    );
  }
  return { algorithm, hex: entry.hex };
}

export function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // undici reports "fetch failed" / "terminated" and hides the useful part in `cause`.
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
}
