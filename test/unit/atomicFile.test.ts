import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readCachedCpuBaseline, stateFiles, writeCachedCpuType } from '../../lib/stateFiles';
import { RunRecords } from '../../lib/run/records';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-atomic-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

test('a write does not use a temporary name another writer may hold, and leaves none behind', () => {
  // `<file>.tmp` taken (another worker's write in progress, or a crashed one's leftover):
  // a fixed temporary name fails here or renames the other writer's half-written file.
  const file = stateFiles(dir).cpuType;
  fs.mkdirSync(`${file}.tmp`, { recursive: true });
  writeCachedCpuType(dir, 'x86-64-v2-AES', ['pve2', 'pve1']);
  expect(readCachedCpuBaseline(dir)).toEqual({ cpuType: 'x86-64-v2-AES', nodes: ['pve1', 'pve2'] });

  const records = new RunRecords(path.join(dir, 'run'));
  fs.mkdirSync(path.join(dir, 'run', `dev-server.json.${process.pid}.tmp`), { recursive: true });
  records.record('dev-server', 'temporal', process.pid);
  expect(records.read('dev-server')).toMatchObject({ what: 'temporal', pid: process.pid });
  expect(fs.readdirSync(dir).sort()).toEqual(['cpu-type', 'cpu-type.tmp', 'run']);
  expect(fs.readdirSync(path.join(dir, 'run')).sort()).toEqual(['dev-server.json', `dev-server.json.${process.pid}.tmp`]);
});

test('state files and run records are private (0600), even in a directory others may read', () => {
  fs.chmodSync(dir, 0o755);
  writeCachedCpuType(dir, 'x86-64-v2-AES');
  const records = new RunRecords(path.join(dir, 'run'));
  records.record('dev-server', 'temporal', process.pid);
  expect(fs.statSync(stateFiles(dir).cpuType).mode & 0o777).toBe(0o600);
  expect(fs.statSync(path.join(dir, 'run', 'dev-server.json')).mode & 0o777).toBe(0o600);
});
