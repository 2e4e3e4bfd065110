import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { OS_VERSIONS, type OsName } from '../../lib/types';

/**
 * A stand-in for cloud.debian.org, cloud-images.ubuntu.com and dl.rockylinux.org on
 * 127.0.0.1: every supported OS/version, in the upstream directory layouts (written out
 * here rather than taken from lib/images/catalog, so a wrong catalog fails the tests),
 * with the upstream checksum file formats, decoy entries included. Images are tiny but
 * valid qcow2 files (`qemu-img check` passes) with a 2 GiB virtual size.
 *
 *   const srv = await startImageServer();
 *   loadConfig({ IMAGE_BASE_DEBIAN: srv.baseUrls.debian, ... })  // or pass srv.baseUrls as bases
 *   srv.failNext(srv.image('debian', '12').path, 2);              // next two requests: 500
 */

export interface FakeImage {
  os: OsName;
  version: string;
  fileName: string;
  /** URL path, the key for the knobs below. */
  path: string;
  url: string;
  checksumPath: string;
  content: Buffer;
  sha256: string;
  sha512: string;
  etag: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  range: string | undefined;
  ifRange: string | undefined;
  headers: http.IncomingHttpHeaders;
}

export interface ImageServer {
  origin: string;
  /** Ready for config.imageBase / the `bases` argument of ensureImage. */
  baseUrls: Record<OsName, string>;
  /** Environment variables pointing QemuRun's config at this server. */
  env: Record<'IMAGE_BASE_DEBIAN' | 'IMAGE_BASE_UBUNTU' | 'IMAGE_BASE_ROCKYLINUX', string>;
  image(os: OsName, version: string): FakeImage;
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
  /** New content and checksum for an image, as when upstream moves `latest/`. */
  replaceImage(os: OsName, version: string): FakeImage;
  /** Clears request logs and pending knobs (not replaced images). */
  reset(): void;
  stop(): Promise<void>;
}

export interface ImageServerOptions {
  /** Size of each fake image; rounded up to whole 4 KiB clusters. Default 64 KiB. */
  imageBytes?: number;
  /** Body chunk size; small enough that truncation and delays hit mid-body. Default 8 KiB. */
  chunkBytes?: number;
}

const DEBIAN_CODENAMES: Record<string, string> = { '11': 'bullseye', '12': 'bookworm', '13': 'trixie' };
const PREFIX: Record<OsName, string> = { debian: '/debian', ubuntu: '/ubuntu', rockylinux: '/rocky' };

/** Directory (URL path) and file name of each image, as upstream lays them out. */
function layout(os: OsName, version: string): { dir: string; fileName: string; checksumFile: string } {
  switch (os) {
    case 'debian':
      return { dir: `/debian/${DEBIAN_CODENAMES[version]}/latest`, fileName: `debian-${version}-generic-amd64.qcow2`, checksumFile: 'SHA512SUMS' };
    case 'ubuntu':
      return { dir: `/ubuntu/${version}/release`, fileName: `ubuntu-${version}-server-cloudimg-amd64.img`, checksumFile: 'SHA256SUMS' };
    case 'rockylinux':
      return { dir: `/rocky/${version}/images/x86_64`, fileName: `Rocky-${version}-GenericCloud-Base.latest.x86_64.qcow2`, checksumFile: 'CHECKSUM' };
  }
}

const CLUSTER = 4096;

/**
 * A minimal qcow2 v3 image: header, a one-entry refcount table, one refcount block, an
 * empty L1 table (every guest cluster unallocated, reads as zeros), then free clusters
 * filled with `seed`-derived bytes so each image and each replacement hashes differently.
 */
export function fakeQcow2(totalBytes: number, seed: string, virtualSize = 2 * 1024 ** 3): Buffer {
  const clusters = Math.max(5, Math.ceil(totalBytes / CLUSTER));
  const buf = Buffer.alloc(clusters * CLUSTER);
  const l1Entries = Math.ceil(virtualSize / (CLUSTER * (CLUSTER / 8)));
  const l1Clusters = Math.ceil((l1Entries * 8) / CLUSTER);
  buf.write('QFI\xfb', 0, 'latin1');
  buf.writeUInt32BE(3, 4); // version
  buf.writeUInt32BE(12, 20); // cluster_bits: 4 KiB clusters keep the file small
  buf.writeBigUInt64BE(BigInt(virtualSize), 24);
  buf.writeUInt32BE(l1Entries, 36); // l1_size
  buf.writeBigUInt64BE(BigInt(3 * CLUSTER), 40); // l1_table_offset
  buf.writeBigUInt64BE(BigInt(1 * CLUSTER), 48); // refcount_table_offset
  buf.writeUInt32BE(1, 56); // refcount_table_clusters
  buf.writeUInt32BE(4, 96); // refcount_order: 16-bit refcounts
  buf.writeUInt32BE(104, 100); // header_length
  buf.writeBigUInt64BE(BigInt(2 * CLUSTER), CLUSTER); // refcount table -> refcount block
  for (let c = 0; c < 3 + l1Clusters; c++) buf.writeUInt16BE(1, 2 * CLUSTER + c * 2); // used clusters
  let block = createHash('sha256').update(seed).digest();
  for (let off = (3 + l1Clusters) * CLUSTER; off < buf.length; off += block.length) {
    block.copy(buf, off);
    block = createHash('sha256').update(block).digest();
  }
  return buf;
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

export async function startImageServer(options: ImageServerOptions = {}): Promise<ImageServer> {
  const imageBytes = options.imageBytes ?? 64 * 1024;
  const chunkBytes = options.chunkBytes ?? 8 * 1024;
  const images = new Map<string, FakeImage>(); // by URL path
  const log: RecordedRequest[] = [];
  const failures = new Map<string, { n: number; status: number }>();
  const truncations = new Map<string, number>();
  const corruptions = new Set<string>();
  const delays = new Map<string, number>(); // '' = every path
  let generation = 0;
  let origin = '';

  const make = (os: OsName, version: string): FakeImage => {
    const { dir, fileName, checksumFile } = layout(os, version);
    const content = fakeQcow2(imageBytes, `${os}-${version}-${generation++}`);
    const sha256 = createHash('sha256').update(content).digest('hex');
    return {
      os, version, fileName, content, sha256,
      sha512: createHash('sha512').update(content).digest('hex'),
      path: `${dir}/${fileName}`,
      url: `${origin}${dir}/${fileName}`,
      checksumPath: `${dir}/${checksumFile}`,
      etag: `"${sha256.slice(0, 16)}"`,
    };
  };
  const byOs = (os: OsName, version: string) => {
    const img = images.get(`${layout(os, version).dir}/${layout(os, version).fileName}`);
    if (!img) throw new Error(`image server has no ${os} ${version}`);
    return img;
  };

  /** Checksum files in each distribution's own format, with entries that must not match. */
  const checksumFile = (img: FakeImage): string => {
    const fake = (name: string, algo: 'sha256' | 'sha512') => createHash(algo).update(name).digest('hex');
    const v = img.version;
    switch (img.os) {
      case 'debian': {
        const others = [`debian-${v}-genericcloud-amd64.qcow2`, `debian-${v}-generic-amd64.raw`, `debian-${v}-generic-amd64.json`];
        return [...others.map((n) => `${fake(n, 'sha512')}  ${n}`), `${img.sha512}  ${img.fileName}`].join('\n') + '\n';
      }
      case 'ubuntu': {
        const others = [`ubuntu-${v}-server-cloudimg-amd64-disk-kvm.img`, `ubuntu-${v}-server-cloudimg-amd64.tar.gz`, `ubuntu-${v}-server-cloudimg-arm64.img`];
        return [...others.map((n) => `${fake(n, 'sha256')} *${n}`), `${img.sha256} *${img.fileName}`].join('\n') + '\n';
      }
      case 'rockylinux': {
        const others = [
          `Rocky-${v}-GenericCloud-Base-${v}.5-20241118.0.x86_64.qcow2`,
          `Rocky-${v}-GenericCloud-LVM.latest.x86_64.qcow2`,
          `Rocky-${v}-EC2-Base.latest.x86_64.qcow2`,
          `Rocky-${v}-GenericCloud.latest.x86_64.qcow2`,
        ];
        const entry = (n: string, hex: string, size: number) => `# ${n}: ${size} bytes\nSHA256 (${n}) = ${hex}\n`;
        return others.map((n) => entry(n, fake(n, 'sha256'), 645988352)).join('') + entry(img.fileName, img.sha256, img.content.length);
      }
    }
  };

  /** The text file at `path`, if it is a checksum file of some image. */
  const textAt = (path: string): string | undefined => {
    for (const img of images.values()) {
      if (img.checksumPath === path) return checksumFile(img);
      // Rocky also publishes a checksum file per image.
      if (img.os === 'rockylinux' && path === `${img.path}.CHECKSUM`) {
        return `# ${img.fileName}: ${img.content.length} bytes\nSHA256 (${img.fileName}) = ${img.sha256}\n`;
      }
    }
    return undefined;
  };

  const server = http.createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const header = (h: string) => (typeof req.headers[h] === 'string' ? (req.headers[h] as string) : undefined);
    log.push({ method: req.method ?? '', path, range: header('range'), ifRange: header('if-range'), headers: req.headers });

    const fail = failures.get(path);
    if (fail && fail.n > 0) {
      fail.n--;
      res.writeHead(fail.status, { 'content-length': '0' }).end();
      return;
    }
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
    await serveImage(req, res, img, header('range'), header('if-range'));
  }

  async function serveImage(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    img: FakeImage,
    range: string | undefined,
    ifRange: string | undefined,
  ): Promise<void> {
    const size = img.content.length;
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
      'content-length': body.length,
      ...(status === 206 ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (corruptions.delete(img.path)) {
      body = Buffer.from(body);
      body[body.length >> 1] ^= 0xff;
    }
    const cut = truncations.get(img.path);
    truncations.delete(img.path);
    const limit = cut === undefined ? body.length : Math.min(cut, body.length);
    const delay = delays.get(img.path) ?? delays.get('') ?? 0;
    for (let off = 0; off < limit; off += chunkBytes) {
      if (delay > 0) await sleep(delay);
      if (res.destroyed) return;
      const chunk = body.subarray(off, Math.min(off + chunkBytes, limit));
      if (!res.write(chunk)) await drained(res);
    }
    if (cut !== undefined) {
      // Drop the connection mid-body, the way a flaky mirror does.
      await new Promise<void>((resolve) => setImmediate(resolve));
      res.socket?.destroy();
      return;
    }
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const os of Object.keys(OS_VERSIONS) as OsName[]) {
    for (const version of OS_VERSIONS[os]) {
      const img = make(os, version);
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
    requests: (path) => log.filter((r) => r.path === path),
    gets: (path) => log.filter((r) => r.path === path && r.method === 'GET').length,
    failNext: (path, n, status = 500) => void failures.set(path, { n, status }),
    truncateNext: (path, bytes) => void truncations.set(path, bytes),
    corruptNext: (path) => void corruptions.add(path),
    setChunkDelay: (ms, path = '') => void delays.set(path, ms),
    replaceImage(os, version) {
      const img = make(os, version);
      images.set(img.path, img);
      return img;
    },
    reset() {
      log.length = 0;
      failures.clear();
      truncations.clear();
      corruptions.clear();
      delays.clear();
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
