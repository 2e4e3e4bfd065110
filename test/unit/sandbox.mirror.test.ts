import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../lib/config';
import { ensureImage } from '../../lib/images/download';
import { OS_VERSIONS, type OsName } from '../../contract';
import { startImageMirror, type ImageMirror } from '../../sandbox/mirror/server';
import { MIRROR_VERSIONS } from '../../sandbox/mirror/upstream';

/**
 * Sandbox mode's built-in image mirror, through the product's own download code: all nine
 * OS versions download and pass their checksums, qemu-img reads them, and the cache they
 * fill stays valid when the mirror comes back on another port (the next start).
 */

const ALL = (Object.keys(OS_VERSIONS) as OsName[]).flatMap((os) => OS_VERSIONS[os].map((version) => ({ os, version })));
let dir: string;
let mirror: ImageMirror;

test("the mirror's default versions are the service's (sandbox mode passes the service's own)", () => {
  expect(MIRROR_VERSIONS).toEqual(OS_VERSIONS);
});

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-mirror-'));
  mirror = await startImageMirror();
});
afterAll(async () => {
  await mirror?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('every OS version downloads from the mirror and matches its published checksum', async () => {
  for (const { os, version } of ALL) {
    const res = await ensureImage({ os, version, dataDir: dir, bases: mirror.baseUrls });
    const img = mirror.image(os, version);
    expect(res).toMatchObject({ downloaded: true, url: img.url, sha: os === 'debian' ? img.sha512 : img.sha256 });
    expect(fs.readFileSync(res.path).equals(img.content)).toBe(true);
  }
});

const qemuImg = '/usr/bin/qemu-img';
test('qemu-img reads the images as qcow2 (skipped without qemu-img)', async () => {
  if (!fs.existsSync(qemuImg)) return;
  for (const { os, version } of [ALL[0], ALL[4], ALL[8]]) {
    const file = path.join(dir, `${os}-${version}.qcow2`);
    fs.writeFileSync(file, mirror.image(os, version).content);
    const { stdout } = await promisify(execFile)(qemuImg, ['info', '--output=json', file]);
    expect(JSON.parse(stdout)).toMatchObject({ format: 'qcow2', 'virtual-size': 2 * 1024 ** 3 });
  }
});

test('after a restart on another port, the cached images are still current', async () => {
  const before = mirror.origin;
  await mirror.stop();
  mirror = await startImageMirror();
  expect(mirror.origin).not.toBe(before);
  for (const { os, version } of ALL) {
    const res = await ensureImage({ os, version, dataDir: dir, bases: mirror.baseUrls });
    expect(res.downloaded).toBe(false);
  }
});

describe('when sandbox mode serves its own images', () => {
  test('MAIN_NODE unset and no IMAGE_BASE_*: the mirror', () => {
    expect(loadConfig({}).imageMirror).toBe(true);
  });
  test('any IMAGE_BASE_* set: that source, upstream for the others', () => {
    const config = loadConfig({ IMAGE_BASE_UBUNTU: 'http://10.0.0.5/ubuntu' });
    expect(config.imageMirror).toBe(false);
    expect(config.imageBase).toEqual({
      debian: 'https://cloud.debian.org/images/cloud',
      ubuntu: 'http://10.0.0.5/ubuntu',
      rockylinux: 'https://dl.rockylinux.org/pub/rocky',
    });
  });
  test('against a real cluster: never', () => {
    const config = loadConfig({ MAIN_NODE: 'pve1', NODE_pve1: '10.0.0.1', GATEWAY: '10.0.0.254', ASSIGN_STORAGE: 'local' });
    expect(config.imageMirror).toBe(false);
  });
});
