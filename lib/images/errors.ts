import { isRetryableType } from '../../contract';

/**
 * Errors of the image cache. Their class names are failure types of contract/failures.ts,
 * which says whether a retry can heal them.
 */
export abstract class ImageError extends Error {
  get nonRetryable(): boolean {
    return !isRetryableType(this.name);
  }
}

/**
 * The image or its checksum file is not there (404, 410, other 4xx), the checksum file
 * does not list the image, or the OS/version has no official image. Retrying cannot help:
 * the URL layout or the request is wrong.
 */
export class ImageNotFoundError extends ImageError {
  override readonly name = 'ImageNotFoundError';
  constructor(message: string, readonly url?: string, readonly status?: number) {
    super(message);
  }
}

/** Network error, 5xx, 408/429, stalled or cut transfer: a later attempt may succeed. */
export class ImageDownloadError extends ImageError {
  override readonly name: string = 'ImageDownloadError';
  constructor(message: string, readonly url?: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The downloaded bytes do not hash to the published checksum. The partial file is deleted
 * first, so the retry starts from zero instead of resuming garbage.
 */
export class ImageChecksumError extends ImageDownloadError {
  override readonly name = 'ImageChecksumError';
  constructor(url: string, readonly expected: string, readonly actual: string) {
    super(`checksum mismatch for ${url}: expected ${expected}, got ${actual}`, url);
  }
}
