import fs from 'node:fs';
import { startHarness, Harness } from './support/harness';
import { requestSse } from './support/sse';

/**
 * Off the cluster (docker-compose), every command reaches the main node over SSH, and
 * the image the worker downloaded must be copied there before `qm importdisk` reads it.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness({}, { mainNodeOverSsh: true });
});

afterAll(async () => {
  await h?.stop();
});

test('with the main node over SSH, the image is copied to it and the install succeeds', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'ubuntu', version: '20.04' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.at(-1)?.message).toBe('[*] User: ubuntu');
  expect(res.events.some((e) => e.message === '[*] copying the image to pve1: 100%')).toBe(true);

  const calls = await h.sandbox.calls();
  const create = calls.find((c) => c.argv[0] === 'qm' && c.argv[1] === 'create')!;
  expect(create.node).toBe('pve1');
  const importCall = calls.find((c) => c.argv[1] === 'importdisk' || (c.argv[1] === 'disk' && c.argv[2] === 'import'))!;
  const imported = importCall.argv.find((a) => a.startsWith(`${h.config.nodeImageDir}/`))!;
  expect(imported.slice(h.config.nodeImageDir.length)).toMatch(/^\/[0-9a-f]{16}\/ubuntu-20\.04-server-cloudimg-amd64\.img$/);
  const cached = fs.readFileSync(`${h.config.dataDir}/images/ubuntu-20.04/ubuntu-20.04-server-cloudimg-amd64.img`);
  expect(fs.readFileSync(imported).equals(cached)).toBe(true);
});

test('a second install of the same image imports the copy already on the main node', async () => {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'ubuntu', version: '20.04' } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.some((e) => e.message.startsWith('[*] copying the image'))).toBe(false);
  const copies = fs.readdirSync(h.config.nodeImageDir, { recursive: true, encoding: 'utf8' });
  expect(copies.filter((f) => f.endsWith('.img'))).toHaveLength(1);
  expect(copies.filter((f) => f.endsWith('.part'))).toEqual([]);
});
