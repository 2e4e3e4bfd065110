import fs from 'node:fs';
import http from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fakeQcow2 } from './qcow2';
import { checksumFile, describeImage, describeImageFile, layout, MIRROR_VERSIONS, perImageChecksum, perImageChecksumPath, PREFIX, type MirrorImage, type OsName } from './upstream';

/**
 * A local stand-in for the three upstream image mirrors: every supported OS version as a
 * small, valid qcow2 image in the upstream directory layout, with the upstream checksum
 * files, served over HTTP the way the real mirrors serve (ETag, Range, If-Range, 416,
 * HEAD). Sandbox mode points the IMAGE_BASE_* at it, so the product's own download,
 * checksum, cache and resume code runs without a network. Image contents depend only on
 * OS and version, so the image cache stays valid across restarts on another port.
 */

export type { MirrorImage } from './upstream';

/** How one image body is sent; tests use it to play a flaky mirror. */
export interface BodyShape {
  /** Flip one byte in the middle. */
  corrupt?: boolean;
  /** Send this many body bytes, then drop the connection. */
  cutAt?: number;
  /** Wait this long before each chunk. */
  delayMs?: number;
}

export interface ImageMirrorOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Size of each image; rounded up to whole 4 KiB clusters. Default 64 KiB. */
  imageBytes?: number;
  /** Body chunk size. Default 8 KiB. */
  chunkBytes?: number;
  /** Sees every request first; returns true when it has answered it. */
  onRequest?(req: http.IncomingMessage, res: http.ServerResponse, path: string): boolean;
  bodyShape?(img: MirrorImage): BodyShape;
  /** Real images to serve instead of the stand-ins (SANDBOX_GUESTS=qemu). */
  files?: RealImage[];
  /** The versions of each distribution to serve. Default MIRROR_VERSIONS. */
  versions?: Readonly<Record<OsName, readonly string[]>>;
}

/** A real image file and the SHA-512 its build recorded. */
export interface RealImage {
  os: OsName;
  version: string;
  file: string;
  sha512: string;
}

export interface ImageMirror {
  origin: string;
  /** Ready for config.imageBase. */
  baseUrls: Record<OsName, string>;
  /** The settings that point QemuRun at this mirror. */
  env: Record<'IMAGE_BASE_DEBIAN' | 'IMAGE_BASE_UBUNTU' | 'IMAGE_BASE_ROCKYLINUX', string>;
  image(os: OsName, version: string): MirrorImage;
  /** New content and checksum for an image, as when upstream moves `latest/`. */
  replaceImage(os: OsName, version: string): MirrorImage;
  stop(): Promise<void>;
}

/** Waits for the client to take more, or to go away. */
function drained(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });
}

export async function startImageMirror(options: ImageMirrorOptions = {}): Promise<ImageMirror> {
  const imageBytes = options.imageBytes ?? 64 * 1024;
  const chunkBytes = options.chunkBytes ?? 8 * 1024;
  const images = new Map<string, MirrorImage>(); // by URL path
  const replacements = new Map<string, number>();
  let origin = '';

  const make = (os: OsName, version: string): MirrorImage => {
    const key = `${os}-${version}`;
    const n = replacements.get(key) ?? 0;
    replacements.set(key, n + 1);
    return describeImage(os, version, fakeQcow2(imageBytes, n === 0 ? key : `${key}-${n}`), origin);
  };
  const byOs = (os: OsName, version: string) => {
    const { dir, fileName } = layout(os, version);
    const img = images.get(`${dir}/${fileName}`);
    if (!img) throw new Error(`image mirror has no ${os} ${version}`);
    return img;
  };

  /** The text file at `path`, if it is a checksum file of some image. */
  const textAt = (path: string): string | undefined => {
    for (const img of images.values()) {
      if (img.checksumPath === path) return checksumFile(img);
      if (perImageChecksumPath(img) === path) return perImageChecksum(img);
    }
    return undefined;
  };

  const server = http.createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (options.onRequest?.(req, res, path)) return;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    const text = textAt(path);
    if (text !== undefined) {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
      res.end(req.method === 'HEAD' ? undefined : text);
      return;
    }
    const img = images.get(path);
    if (!img) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    await serveImage(req, res, img);
  }

  async function serveImage(req: http.IncomingMessage, res: http.ServerResponse, img: MirrorImage): Promise<void> {
    const header = (h: string) => (typeof req.headers[h] === 'string' ? (req.headers[h] as string) : undefined);
    const range = header('range');
    const ifRange = header('if-range');
    const size = img.size;
    const common = { 'content-type': 'application/octet-stream', 'accept-ranges': 'bytes', etag: img.etag };
    let start = 0;
    let end = size - 1;
    let status = 200;
    // Like real servers: If-Range naming another version means "send the whole new file".
    const m = range && (!ifRange || ifRange === img.etag) ? /^bytes=(\d+)-(\d*)$/.exec(range) : null;
    if (m) {
      start = Number(m[1]);
      if (start >= size) {
        res.writeHead(416, { ...common, 'content-range': `bytes */${size}` }).end();
        return;
      }
      end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
      status = 206;
    }
    let body = img.content.subarray(start, end + 1);
    res.writeHead(status, {
      ...common,
      'content-length': end - start + 1,
      ...(status === 206 ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (img.file) {
      await pipeline(fs.createReadStream(img.file, { start, end }), res).catch(() => res.destroy());
      return;
    }
    const shape = options.bodyShape?.(img) ?? {};
    if (shape.corrupt) {
      body = Buffer.from(body);
      body[body.length >> 1] ^= 0xff;
    }
    const limit = shape.cutAt === undefined ? body.length : Math.min(shape.cutAt, body.length);
    for (let off = 0; off < limit; off += chunkBytes) {
      if (shape.delayMs) await sleep(shape.delayMs);
      if (res.destroyed) return;
      const chunk = body.subarray(off, Math.min(off + chunkBytes, limit));
      if (!res.write(chunk)) await drained(res);
    }
    if (shape.cutAt !== undefined) {
      // Drop the connection mid-body, the way a flaky mirror does.
      await new Promise<void>((resolve) => setImmediate(resolve));
      res.socket?.destroy();
      return;
    }
    res.end();
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  origin = `http://${host}:${(server.address() as AddressInfo).port}`;
  const versions = options.versions ?? MIRROR_VERSIONS;
  for (const os of Object.keys(versions) as OsName[]) {
    for (const version of versions[os]) {
      const real = options.files?.find((f) => f.os === os && f.version === version);
      const img = real ? describeImageFile(os, version, real.file, real.sha512, fs.statSync(real.file).size, origin) : make(os, version);
      images.set(img.path, img);
    }
  }
  const baseUrls: Record<OsName, string> = {
    debian: origin + PREFIX.debian,
    ubuntu: origin + PREFIX.ubuntu,
    rockylinux: origin + PREFIX.rockylinux,
  };

  return {
    origin,
    baseUrls,
    env: { IMAGE_BASE_DEBIAN: baseUrls.debian, IMAGE_BASE_UBUNTU: baseUrls.ubuntu, IMAGE_BASE_ROCKYLINUX: baseUrls.rockylinux },
    image: byOs,
    replaceImage(os, version) {
      const img = make(os, version);
      images.set(img.path, img);
      return img;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
