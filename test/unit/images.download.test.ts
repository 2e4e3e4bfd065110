import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureImage, imageCachePath, type EnsureImageOptions } from '../../lib/images/download';
import { ImageChecksumError, ImageDownloadError, ImageNotFoundError } from '../../lib/images/errors';
import type { DownloadProgress } from '../../lib/images/progress';
import { OS_VERSIONS, type OsName } from '../../contract';
import { startImageServer, type ImageServer } from '../support/imageServer';
import { eventually } from '../../sandbox/testkit';

let srv: ImageServer;
let dataDir: string;

beforeAll(async () => {
  srv = await startImageServer();
});
afterAll(async () => {
  await srv.stop();
});
beforeEach(async () => {
  srv.reset();
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'qemurun-images-'));
});
afterEach(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

const ensure = (osName: OsName, version: string, extra: Partial<EnsureImageOptions> = {}) =>
  ensureImage({ os: osName, version, dataDir, bases: srv.baseUrls, ...extra });

const cacheDir = (osName: OsName, version: string) => path.join(dataDir, 'images', `${osName}-${version}`);
const exists = (p: string) => fs.stat(p).then(() => true, () => false);

const all = (Object.keys(OS_VERSIONS) as OsName[]).flatMap((o) => OS_VERSIONS[o].map((v) => [o, v] as const));

describe('ensureImage', () => {
  test.each(all)('downloads and verifies %s %s', async (osName, version) => {
    const img = srv.image(osName, version);
    const got = await ensure(osName, version);
    expect(got.path).toBe(path.join(cacheDir(osName, version), img.fileName));
    expect(got.path).toBe(imageCachePath(dataDir, osName, version, srv.baseUrls));
    expect(got).toMatchObject({ downloaded: true, bytes: img.content.length, url: img.url });
    expect(got.sha).toBe(osName === 'debian' ? img.sha512 : img.sha256);
    expect(got.algorithm).toBe(osName === 'debian' ? 'sha512' : 'sha256');
    expect((await fs.readFile(got.path)).equals(img.content)).toBe(true);
    // Nothing but the image is left behind: no part, part metadata or lock.
    expect(await fs.readdir(cacheDir(osName, version))).toEqual([img.fileName]);
    expect(srv.gets(img.path)).toBe(1);
    expect(srv.requests(img.path)[0].headers['accept-encoding']).toBe('identity');
  });

  test('a cached file that still matches the published checksum is not downloaded again', async () => {
    const img = srv.image('ubuntu', '24.04');
    await ensure('ubuntu', '24.04');
    const again = await ensure('ubuntu', '24.04');
    expect(again).toMatchObject({ downloaded: false, sha: img.sha256, bytes: img.content.length });
    expect(srv.gets(img.path)).toBe(1);
    // The checksum is read each time: that is how a moved `latest/` is noticed.
    expect(srv.gets(img.checksumPath)).toBe(2);
  });

  test('a cached file that no longer matches (upstream moved latest/) is replaced', async () => {
    await ensure('debian', '12');
    const next = srv.replaceImage('debian', '12');
    const got = await ensure('debian', '12');
    expect(got).toMatchObject({ downloaded: true, sha: next.sha512 });
    expect((await fs.readFile(got.path)).equals(next.content)).toBe(true);
  });

  test('a damaged cached file is downloaded again', async () => {
    const first = await ensure('rockylinux', '9');
    await fs.writeFile(first.path, 'not an image');
    const got = await ensure('rockylinux', '9');
    expect(got.downloaded).toBe(true);
    expect(srv.gets(srv.image('rockylinux', '9').path)).toBe(2);
  });

  test('a cut connection leaves a part that the next attempt resumes with a Range request', async () => {
    const img = srv.image('rockylinux', '10');
    srv.truncateNext(img.path, 20_000);
    const err = await ensure('rockylinux', '10').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as ImageDownloadError).nonRetryable).toBe(false);
    const part = path.join(cacheDir('rockylinux', '10'), `${img.fileName}.part`);
    const partBytes = (await fs.stat(part)).size;
    expect(partBytes).toBeGreaterThan(0);
    expect(partBytes).toBeLessThan(img.content.length);
    expect(await exists(path.join(cacheDir('rockylinux', '10'), img.fileName))).toBe(false);

    const got = await ensure('rockylinux', '10');
    expect(got).toMatchObject({ downloaded: true, sha: img.sha256, bytes: img.content.length });
    expect((await fs.readFile(got.path)).equals(img.content)).toBe(true);
    const resumed = srv.requests(img.path)[1];
    expect(resumed.range).toBe(`bytes=${partBytes}-`);
    // If-Range guards against finishing an older version with newer bytes.
    expect(resumed.ifRange).toBe(img.etag);
    expect(await fs.readdir(cacheDir('rockylinux', '10'))).toEqual([img.fileName]);
  });

  test('a part of an image that has since been replaced upstream is discarded, not resumed', async () => {
    const old = srv.image('debian', '13');
    srv.truncateNext(old.path, 20_000);
    await expect(ensure('debian', '13')).rejects.toBeInstanceOf(ImageDownloadError);
    const next = srv.replaceImage('debian', '13');
    const got = await ensure('debian', '13');
    expect(got.sha).toBe(next.sha512);
    expect(srv.requests(next.path)[1].range).toBeUndefined();
  });

  test('a part longer than the image (416) is dropped and the download restarts', async () => {
    const img = srv.image('ubuntu', '22.04');
    srv.truncateNext(img.path, 20_000);
    await expect(ensure('ubuntu', '22.04')).rejects.toBeInstanceOf(ImageDownloadError);
    const part = path.join(cacheDir('ubuntu', '22.04'), `${img.fileName}.part`);
    await fs.appendFile(part, Buffer.alloc(img.content.length));
    const got = await ensure('ubuntu', '22.04');
    expect(got.sha).toBe(img.sha256);
    const [, ranged, fresh] = srv.requests(img.path);
    expect(ranged.range).toMatch(/^bytes=\d+-$/);
    expect(fresh.range).toBeUndefined();
  });

  test('a server answering a resume with 200 (If-Range: file changed) restarts from zero', async () => {
    const img = srv.image('rockylinux', '8');
    const dir = cacheDir('rockylinux', '8');
    const part = path.join(dir, `${img.fileName}.part`);
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(part, img.content.subarray(0, 1000));
    const record = { url: img.url, algorithm: 'sha256', hex: img.sha256, validator: '"an-older-etag"' };
    await fs.writeFile(`${part}.json`, JSON.stringify(record));
    const got = await ensure('rockylinux', '8');
    expect(got).toMatchObject({ downloaded: true, sha: img.sha256, bytes: img.content.length });
    expect(srv.requests(img.path)).toMatchObject([{ range: 'bytes=1000-', ifRange: '"an-older-etag"' }]);
  });

  test('a complete part left by a crash before the rename is finished without a request', async () => {
    const img = srv.image('ubuntu', '24.04');
    const dir = cacheDir('ubuntu', '24.04');
    const part = path.join(dir, `${img.fileName}.part`);
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(part, img.content);
    await fs.writeFile(`${part}.json`, JSON.stringify({ url: img.url, algorithm: 'sha256', hex: img.sha256 }));
    await expect(ensure('ubuntu', '24.04')).resolves.toMatchObject({ downloaded: true, sha: img.sha256 });
    expect(srv.gets(img.path)).toBe(0);
    expect(await fs.readdir(dir)).toEqual([img.fileName]);
  });

  test('a corrupted body fails retryably and leaves neither the image nor a part', async () => {
    const img = srv.image('debian', '11');
    srv.corruptNext(img.path);
    const err = await ensure('debian', '11').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageChecksumError);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as ImageChecksumError).nonRetryable).toBe(false);
    expect(await fs.readdir(cacheDir('debian', '11'))).toEqual([]);
    // The retry starts from zero and succeeds.
    await expect(ensure('debian', '11')).resolves.toMatchObject({ downloaded: true, sha: img.sha512 });
    expect(srv.requests(img.path)[1].range).toBeUndefined();
  });

  test('a missing checksum file is a non-retryable ImageNotFoundError', async () => {
    const bases = { ...srv.baseUrls, debian: `${srv.origin}/nowhere` };
    const err = await ensure('debian', '12', { bases }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect(err).toMatchObject({ nonRetryable: true, status: 404, name: 'ImageNotFoundError' });
  });

  test('a missing image is a non-retryable ImageNotFoundError', async () => {
    const img = srv.image('ubuntu', '20.04');
    srv.failNext(img.path, 1, 404);
    const err = await ensure('ubuntu', '20.04').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect(err).toMatchObject({ nonRetryable: true, url: img.url, status: 404 });
    expect(await fs.readdir(cacheDir('ubuntu', '20.04'))).toEqual([]);
  });

  test('5xx on the checksum or the image, and an unreachable server, are retryable', async () => {
    const img = srv.image('rockylinux', '8');
    srv.failNext(img.checksumPath, 1, 503);
    await expect(ensure('rockylinux', '8')).rejects.toMatchObject({ name: 'ImageDownloadError', nonRetryable: false });
    srv.failNext(img.path, 1, 500);
    await expect(ensure('rockylinux', '8')).rejects.toMatchObject({ name: 'ImageDownloadError', nonRetryable: false });
    const closed = await closedPortUrl();
    await expect(ensure('rockylinux', '8', { bases: { ...srv.baseUrls, rockylinux: closed } })).rejects.toMatchObject({
      name: 'ImageDownloadError',
      nonRetryable: false,
    });
    await expect(ensure('rockylinux', '8')).resolves.toMatchObject({ downloaded: true });
  });

  test('10 concurrent callers share one download', async () => {
    const img = srv.image('ubuntu', '24.04');
    srv.setChunkDelay(5, img.path);
    const seen: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => ensure('ubuntu', '24.04', { onProgress: (p) => void (i === 9 && seen.push(p.percent ?? -1)) })),
    );
    expect(srv.gets(img.path)).toBe(1);
    expect(srv.gets(img.checksumPath)).toBe(1);
    expect(new Set(results.map((r) => r.path)).size).toBe(1);
    expect(results.every((r) => r.sha === img.sha256 && r.downloaded)).toBe(true);
    // A caller that joined the shared download still hears its progress.
    expect(seen.at(-1)).toBe(100);
  });

  test('progress is throttled and reaches 100', async () => {
    const img = srv.image('debian', '12');
    srv.setChunkDelay(2, img.path);
    const events: DownloadProgress[] = [];
    await ensure('debian', '12', { onProgress: (p) => events.push(p) });
    expect(events[0]).toMatchObject({ receivedBytes: 0, totalBytes: img.content.length, percent: 0 });
    expect(events.at(-1)).toEqual({ receivedBytes: img.content.length, totalBytes: img.content.length, percent: 100 });
    // 8 chunks in ~16 ms: the 500 ms throttle keeps only the first and the final report.
    expect(events).toHaveLength(2);
  });

  test('an AbortSignal stops the download and keeps the part for a later resume', async () => {
    const img = srv.image('rockylinux', '9');
    srv.setChunkDelay(40, img.path);
    const ac = new AbortController();
    const reason = new Error('cancelled by test');
    const started = ensure('rockylinux', '9', { signal: ac.signal });
    await waitUntil(async () => (await fs.stat(path.join(cacheDir('rockylinux', '9'), `${img.fileName}.part`)).catch(() => null))?.size ?? 0);
    ac.abort(reason);
    await expect(started).rejects.toBe(reason);
    expect(await exists(path.join(cacheDir('rockylinux', '9'), img.fileName))).toBe(false);
    expect(await exists(path.join(cacheDir('rockylinux', '9'), `${img.fileName}.lock`))).toBe(false);
    srv.setChunkDelay(0, img.path);
    await expect(ensure('rockylinux', '9')).resolves.toMatchObject({ downloaded: true, sha: img.sha256 });
    expect(srv.requests(img.path)[1].range).toMatch(/^bytes=[1-9]\d*-$/);
  });

  test('one caller giving up does not stop the download another caller waits for', async () => {
    const img = srv.image('debian', '11');
    srv.setChunkDelay(20, img.path);
    const ac = new AbortController();
    const quitter = ensure('debian', '11', { signal: ac.signal });
    const stayer = ensure('debian', '11');
    setTimeout(() => ac.abort(new Error('bye')), 30);
    await expect(quitter).rejects.toThrow('bye');
    await expect(stayer).resolves.toMatchObject({ downloaded: true, sha: img.sha512 });
    expect(srv.gets(img.path)).toBe(1);
  });

  test('callers sharing one AbortSignal stop the shared download together', async () => {
    const img = srv.image('ubuntu', '22.04');
    srv.setChunkDelay(30, img.path);
    const ac = new AbortController();
    const calls = [ensure('ubuntu', '22.04', { signal: ac.signal }), ensure('ubuntu', '22.04', { signal: ac.signal })];
    setTimeout(() => ac.abort(new Error('both gone')), 40);
    for (const c of calls) await expect(c).rejects.toThrow('both gone');
    // The last one out waited for the download to wind down: nothing holds the lock.
    expect(await exists(path.join(cacheDir('ubuntu', '22.04'), `${img.fileName}.lock`))).toBe(false);
    expect(await exists(path.join(cacheDir('ubuntu', '22.04'), img.fileName))).toBe(false);
  });

  test('a stalled transfer fails retryably after the idle timeout', async () => {
    const img = srv.image('ubuntu', '20.04');
    srv.setChunkDelay(1_000, img.path);
    const err = await ensure('ubuntu', '20.04', { idleTimeoutMs: 150 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as Error).message).toMatch(/no data for 150 ms/);
  });

  describe('across processes (lock file)', () => {
    test('waits for another live process holding the lock, then reuses its result', async () => {
      const img = srv.image('rockylinux', '9');
      const dir = cacheDir('rockylinux', '9');
      const finalPath = path.join(dir, img.fileName);
      await fs.mkdir(dir, { recursive: true });
      const other = spawn('sleep', ['30'], { stdio: 'ignore' });
      try {
        const lock = { pid: other.pid, host: os.hostname(), token: 'other-process', since: new Date().toISOString() };
        await fs.writeFile(`${finalPath}.lock`, JSON.stringify(lock));
        let waited = 0;
        const pending = ensure('rockylinux', '9', { onWaitForLock: () => waited++ });
        await waitUntil(async () => waited);
        // The other process finishes: verified file in place, lock gone.
        await fs.writeFile(finalPath, img.content);
        await fs.rm(`${finalPath}.lock`);
        await expect(pending).resolves.toMatchObject({ downloaded: false, sha: img.sha256 });
        expect(srv.gets(img.path)).toBe(0);
      } finally {
        other.kill();
      }
    });

    test('a second process waits for the first one\'s download and reuses it', async () => {
      const img = srv.image('debian', '12');
      srv.setChunkDelay(40, img.path);
      const script = `
        const { ensureImage } = require('./lib/images/download');
        const [dataDir, bases] = [process.argv[1], JSON.parse(process.argv[2])];
        ensureImage({ os: 'debian', version: '12', dataDir, bases })
          .then((r) => console.log(JSON.stringify(r)), (e) => { console.error(e); process.exit(1); });`;
      const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script, dataDir, JSON.stringify(srv.baseUrls)], {
        cwd: path.resolve(__dirname, '..', '..'),
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', r));
      // Start once the other process is mid-download.
      await waitUntil(() => exists(path.join(cacheDir('debian', '12'), `${img.fileName}.part`)), 30_000);
      let waited = 0;
      const mine = await ensure('debian', '12', { onWaitForLock: () => waited++ });
      expect(await exited).toBe(0);
      expect(JSON.parse(out)).toMatchObject({ downloaded: true, sha: img.sha512 });
      expect(waited).toBe(1);
      expect(mine).toMatchObject({ downloaded: false, sha: img.sha512 });
      expect(srv.gets(img.path)).toBe(1);
    });

    test('takes over a lock left by a process that died', async () => {
      const img = srv.image('debian', '13');
      const dir = cacheDir('debian', '13');
      await fs.mkdir(dir, { recursive: true });
      const dead = await deadPid();
      const lock = { pid: dead, host: os.hostname(), token: 'crashed', since: new Date().toISOString() };
      await fs.writeFile(path.join(dir, `${img.fileName}.lock`), JSON.stringify(lock));
      await expect(ensure('debian', '13')).resolves.toMatchObject({ downloaded: true });
      expect(await fs.readdir(dir)).toEqual([img.fileName]);
    });
  });
});

async function waitUntil(probe: () => Promise<unknown>, timeoutMs = 5_000): Promise<void> {
  await eventually(async () => expect(await probe()).toBeTruthy(), timeoutMs, 10);
}

async function deadPid(): Promise<number> {
  const child = spawn('true', { stdio: 'ignore' });
  await new Promise((r) => child.once('exit', r));
  return child.pid as number;
}

/** A loopback URL nobody listens on. */
async function closedPortUrl(): Promise<string> {
  const net = await import('node:net');
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as import('node:net').AddressInfo).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}/rocky`;
}
