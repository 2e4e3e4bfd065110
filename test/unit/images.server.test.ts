import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findChecksum } from '../../lib/images/checksums';
import { ProgressThrottle, type DownloadProgress } from '../../lib/images/progress';
import { startImageServer, type ImageServer } from '../support/imageServer';

let srv: ImageServer;
beforeAll(async () => {
  srv = await startImageServer();
});
afterAll(async () => {
  await srv.stop();
});
beforeEach(() => srv.reset());

describe('test image server', () => {
  test('images are qcow2 v3 with a 2 GiB virtual size', async () => {
    const img = srv.image('ubuntu', '24.04');
    const body = Buffer.from(await (await fetch(img.url)).arrayBuffer());
    expect(body.subarray(0, 4).toString('latin1')).toBe('QFI\xfb');
    expect(body.readUInt32BE(4)).toBe(3);
    expect(body.readBigUInt64BE(24)).toBe(2n * 1024n ** 3n);
    expect(body.equals(img.content)).toBe(true);
  });

  const qemuImg = '/usr/bin/qemu-img';
  const haveQemuImg = fs.access(qemuImg).then(() => true, () => false);
  test('qemu-img accepts the fake image (skipped without qemu-img)', async () => {
    if (!(await haveQemuImg)) return;
    const file = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'qemurun-qcow2-')), 'x.qcow2');
    await fs.writeFile(file, srv.image('rockylinux', '9').content);
    const { stdout } = await promisify(execFile)(qemuImg, ['info', '--output=json', file]);
    expect(JSON.parse(stdout)).toMatchObject({ format: 'qcow2', 'virtual-size': 2 * 1024 ** 3 });
    await promisify(execFile)(qemuImg, ['check', file]);
    await fs.rm(path.dirname(file), { recursive: true });
  });

  test('checksum files list each image in the upstream format', async () => {
    for (const [os, version, fmt] of [
      ['debian', '12', /^[0-9a-f]{128} {2}debian-12-generic-amd64\.qcow2$/m],
      ['ubuntu', '22.04', /^[0-9a-f]{64} \*ubuntu-22\.04-server-cloudimg-amd64\.img$/m],
      ['rockylinux', '8', /^# Rocky-8-GenericCloud-Base\.latest\.x86_64\.qcow2: \d+ bytes\nSHA256 \(Rocky-8-GenericCloud-Base\.latest\.x86_64\.qcow2\) = [0-9a-f]{64}$/m],
    ] as const) {
      const img = srv.image(os, version);
      const text = await (await fetch(`${srv.origin}${img.checksumPath}`)).text();
      expect(text).toMatch(fmt);
      expect(findChecksum(text, img.fileName)?.hex).toBe(os === 'debian' ? img.sha512 : img.sha256);
    }
  });

  test('Range requests, If-Range and 416', async () => {
    const img = srv.image('debian', '11');
    const part = await fetch(img.url, { headers: { range: 'bytes=100-' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 100-${img.content.length - 1}/${img.content.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(img.content.subarray(100))).toBe(true);
    const changed = await fetch(img.url, { headers: { range: 'bytes=100-', 'if-range': '"other"' } });
    expect(changed.status).toBe(200);
    await changed.arrayBuffer();
    const past = await fetch(img.url, { headers: { range: `bytes=${img.content.length}-` } });
    expect(past.status).toBe(416);
    expect(srv.requests(img.path).map((r) => r.range)).toEqual(['bytes=100-', 'bytes=100-', `bytes=${img.content.length}-`]);
  });

  test('knobs: failNext, corruptNext, request log', async () => {
    const img = srv.image('rockylinux', '10');
    srv.failNext(img.path, 2, 503);
    expect((await fetch(img.url)).status).toBe(503);
    expect((await fetch(img.url, { method: 'HEAD' })).status).toBe(503);
    srv.corruptNext(img.path);
    const bad = Buffer.from(await (await fetch(img.url)).arrayBuffer());
    expect(bad.length).toBe(img.content.length);
    expect(bad.equals(img.content)).toBe(false);
    expect(srv.gets(img.path)).toBe(2);
    expect(srv.requests(img.path)).toHaveLength(3);
  });
});

describe('ProgressThrottle', () => {
  test('at most one report per 1% and per 500 ms, plus first and final', () => {
    let now = 0;
    const seen: DownloadProgress[] = [];
    const t = new ProgressThrottle((p) => seen.push(p), 500, () => now);
    t.report(0, 1000);
    for (let b = 1; b <= 1000; b++) {
      now += 5; // 5 s in all
      t.report(b, 1000);
    }
    t.report(1000, 1000, true);
    expect(seen[0].percent).toBe(0);
    expect(seen.at(-1)?.percent).toBe(100);
    expect(seen.length).toBeLessThanOrEqual(12);
    for (let i = 1; i < seen.length - 1; i++) expect(seen[i].percent! - seen[i - 1].percent!).toBeGreaterThanOrEqual(1);
  });

  test('unknown total: time-throttled, percent undefined', () => {
    let now = 0;
    const seen: DownloadProgress[] = [];
    const t = new ProgressThrottle((p) => seen.push(p), 500, () => now);
    for (let b = 0; b < 100; b++) {
      now += 50;
      t.report(b * 10, undefined);
    }
    expect(seen.length).toBe(10);
    expect(seen.every((p) => p.percent === undefined && p.totalBytes === undefined)).toBe(true);
  });
});
