import fs from 'node:fs';
import path from 'node:path';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * Off the cluster (docker-compose), every command reaches the main node over SSH, and
 * the image the worker downloaded must be copied there before `qm importdisk` reads it.
 */

const IMAGE = 'ubuntu-20.04-server-cloudimg-amd64.img';
const TWO_DAYS_AGO = new Date(Date.now() - 2 * 86_400_000);

let h: Harness;
let imported: string;

/** A file under the main node's image directory, with its modification time. */
function plant(rel: string, mtime = new Date()): string {
  const file = path.join(h.config.nodeImageDir, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'an earlier copy');
  fs.utimesSync(file, mtime, mtime);
  return file;
}

beforeAll(async () => {
  h = await startHarness({}, { mainNodeOverSsh: true });
});

afterAll(async () => {
  await h?.stop();
});

test('with the main node over SSH, the image is copied to it and the install succeeds', async () => {
  const earlier = {
    // An earlier release of the same image, unused for two days: pruned with its
    // interrupted copy and its directory.
    stale: plant(`0123456789abcdef/${IMAGE}`, TWO_DAYS_AGO),
    stalePart: plant(`0123456789abcdef/${IMAGE}.1a2b3c.part`, TWO_DAYS_AGO),
    // Another release used a minute ago (an import may still be reading it): kept.
    recent: plant(`fedcba9876543210/${IMAGE}`),
    // Another OS's image, and a file outside the <checksum>/ layout: not ours to judge.
    otherImage: plant('1111111111111111/debian-12-generic-amd64.qcow2', TWO_DAYS_AGO),
    foreign: plant(`not-a-checksum/${IMAGE}`, TWO_DAYS_AGO),
  };

  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'ubuntu', version: '20.04' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-1)?.message).toBe('[*] User: ubuntu');
  expect(res.events.some((e) => e.message === '[*] copying the image to pve1: 100%')).toBe(true);
  expect(res.events.some((e) => e.message === `[*] removed 2 older copies of ${IMAGE} from pve1`)).toBe(true);

  const calls = await h.sandbox.calls();
  const create = calls.find((c) => c.argv[0] === 'qm' && c.argv[1] === 'create')!;
  expect(create.node).toBe('pve1');
  const importCall = calls.find((c) => c.argv[1] === 'importdisk' || (c.argv[1] === 'disk' && c.argv[2] === 'import'))!;
  imported = importCall.argv.find((a) => a.startsWith(`${h.config.nodeImageDir}/`))!;
  expect(imported.slice(h.config.nodeImageDir.length)).toMatch(new RegExp(`^/[0-9a-f]{16}/${IMAGE.replace(/\./g, '\\.')}$`));
  const cached = fs.readFileSync(`${h.config.dataDir}/images/ubuntu-20.04/${IMAGE}`);
  expect(fs.readFileSync(imported).equals(cached)).toBe(true);

  expect(fs.existsSync(earlier.stale)).toBe(false);
  expect(fs.existsSync(earlier.stalePart)).toBe(false);
  expect(fs.existsSync(path.dirname(earlier.stale))).toBe(false);
  for (const kept of [earlier.recent, earlier.otherImage, earlier.foreign]) expect(fs.existsSync(kept)).toBe(true);
});

test('a second install of the same image imports the copy already on the main node', async () => {
  fs.utimesSync(imported, TWO_DAYS_AGO, TWO_DAYS_AGO);
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'ubuntu', version: '20.04' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.some((e) => e.message.startsWith('[*] copying the image'))).toBe(false);
  const copies = fs.readdirSync(h.config.nodeImageDir, { recursive: true, encoding: 'utf8' });
  expect(copies.filter((f) => f.endsWith('.part'))).toEqual([]);
  expect(copies.filter((f) => f.endsWith(IMAGE)).sort()).toEqual([path.relative(h.config.nodeImageDir, imported), `fedcba9876543210/${IMAGE}`, `not-a-checksum/${IMAGE}`].sort());
  // Reusing the copy marks it as in use, so a newer release does not prune it right away.
  expect(Date.now() - fs.statSync(imported).mtimeMs).toBeLessThan(10 * 60_000);
});
