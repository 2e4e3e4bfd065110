import type http from 'node:http';
import { OS_VERSIONS } from '../../contract';
import { startImageMirror, type ImageMirror, type MirrorImage, type RealImage } from '../../sandbox/mirror/server';

/**
 * The sandbox's image mirror (sandbox/mirror) with a flaky-mirror remote control and a
 * request log, for the download tests:
 *
 *   const srv = await startImageServer();
 *   loadConfig({ IMAGE_BASE_DEBIAN: srv.baseUrls.debian, ... })  // or pass srv.baseUrls as bases
 *   srv.failNext(srv.image('debian', '12').path, 2);              // next two requests: 500
 */

export type FakeImage = MirrorImage;

export interface RecordedRequest {
  method: string;
  path: string;
  range: string | undefined;
  ifRange: string | undefined;
  headers: http.IncomingHttpHeaders;
}

export interface ImageServer extends ImageMirror {
  /** Every request (any method) seen for a URL path, oldest first. */
  requests(path: string): RecordedRequest[];
  /** GET requests seen for a URL path. */
  gets(path: string): number;
  /** The next `n` requests for `path` answer `status` (default 500) with no body. */
  failNext(path: string, n: number, status?: number): void;
  /** The next GET of `path` sends its headers and `bytes` body bytes, then drops the connection. */
  truncateNext(path: string, bytes: number): void;
  /** The next GET of `path` serves the right length with one byte flipped. */
  corruptNext(path: string): void;
  /** Wait this long before each body chunk (for `path`, or every path when omitted). */
  setChunkDelay(ms: number, path?: string): void;
  /** Clears request logs and pending knobs (not replaced images). */
  reset(): void;
}

export interface ImageServerOptions {
  /** Size of each fake image; rounded up to whole 4 KiB clusters. Default 64 KiB. */
  imageBytes?: number;
  /** Body chunk size; small enough that truncation and delays hit mid-body. Default 8 KiB. */
  chunkBytes?: number;
  /** Real images to serve instead of the stand-ins (real guests). */
  files?: RealImage[];
}

export async function startImageServer(options: ImageServerOptions = {}): Promise<ImageServer> {
  const log: RecordedRequest[] = [];
  const failures = new Map<string, { n: number; status: number }>();
  const truncations = new Map<string, number>();
  const corruptions = new Set<string>();
  const delays = new Map<string, number>(); // '' = every path

  const mirror = await startImageMirror({
    versions: OS_VERSIONS,
    ...options,
    onRequest(req, res, path) {
      const header = (h: string) => (typeof req.headers[h] === 'string' ? (req.headers[h] as string) : undefined);
      log.push({ method: req.method ?? '', path, range: header('range'), ifRange: header('if-range'), headers: req.headers });
      const fail = failures.get(path);
      if (!fail || fail.n === 0) return false;
      fail.n--;
      res.writeHead(fail.status, { 'content-length': '0' }).end();
      return true;
    },
    bodyShape(img) {
      const cutAt = truncations.get(img.path);
      truncations.delete(img.path);
      return { corrupt: corruptions.delete(img.path), cutAt, delayMs: delays.get(img.path) ?? delays.get('') ?? 0 };
    },
  });

  return {
    ...mirror,
    requests: (path) => log.filter((r) => r.path === path),
    gets: (path) => log.filter((r) => r.path === path && r.method === 'GET').length,
    failNext: (path, n, status = 500) => void failures.set(path, { n, status }),
    truncateNext: (path, bytes) => void truncations.set(path, bytes),
    corruptNext: (path) => void corruptions.add(path),
    setChunkDelay: (ms, path = '') => void delays.set(path, ms),
    reset() {
      log.length = 0;
      failures.clear();
      truncations.clear();
      corruptions.clear();
      delays.clear();
    },
  };
}
