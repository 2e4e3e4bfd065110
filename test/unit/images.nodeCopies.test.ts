import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalExecutor } from '../../lib/executor/local';
import { copyDir, pruneOlderCopies } from '../../lib/images/nodeCopies';
import { testSpawner } from '../support/spawner';

/** Pruning runs find(1) on the node; here the node is this machine. */

const SHA = 'abcdef0123456789'.repeat(4);
const OLD = new Date(Date.now() - 3 * 86_400_000);
let root: string;

function plant(rel: string, mtime = OLD): string {
  const file = path.join(root, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'x');
  fs.utimesSync(file, mtime, mtime);
  return file;
}

beforeEach(() => {
  // Glob characters and a space in the root are matched literally.
  root = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'qr-copies-')), 'images [*?] here');
});

afterEach(() => fs.rmSync(path.dirname(root), { recursive: true, force: true }));

test('removes only older, unused copies of the same image in the <checksum>/ layout', async () => {
  const current = plant(`${SHA.slice(0, 16)}/img.qcow2`);
  const stale = plant('0000000000000000/img.qcow2');
  const part = plant('0000000000000001/img.qcow2.9f9f9f.part');
  const recent = plant('0000000000000002/img.qcow2', new Date());
  const kept = [
    current,
    recent,
    plant('0000000000000003/other.qcow2'),
    plant('0000000000000004/img.qcow2.bak'),
    plant('NOT-HEX-00000000/img.qcow2'),
    plant('0000000000000005/nested/img.qcow2'),
  ];

  const removed = await pruneOlderCopies(new LocalExecutor('pve1', { spawner: testSpawner() }), root, SHA, 'img.qcow2');

  expect(removed.sort()).toEqual([stale, part].sort());
  for (const f of [stale, part]) expect(fs.existsSync(f)).toBe(false);
  for (const f of [path.dirname(stale), path.dirname(part)]) expect(fs.existsSync(f)).toBe(false);
  for (const f of kept) expect(fs.existsSync(f)).toBe(true);
  expect(copyDir(root, SHA)).toBe(path.dirname(current));
});

test('a root that does not exist yet is not an error', async () => {
  expect(await pruneOlderCopies(new LocalExecutor('pve1', { spawner: testSpawner() }), path.join(root, 'absent'), SHA, 'img.qcow2')).toEqual([]);
});
