import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { acquireLock } from '../../lib/images/lock';

let dir: string;
let lockPath: string;

beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'qemurun-lock-'));
  lockPath = path.join(dir, 'image.qcow2.lock');
});
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const owner = (pid: number, token = 'someone-else') =>
  JSON.stringify({ pid, host: os.hostname(), token, since: new Date().toISOString() });

describe('acquireLock', () => {
  test('creates the lock with our pid and removes it on release', async () => {
    const lock = await acquireLock(lockPath);
    expect(JSON.parse(await fs.readFile(lockPath, 'utf8'))).toMatchObject({ pid: process.pid, host: os.hostname() });
    await lock.release();
    await expect(fs.stat(lockPath)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  test('a second holder waits until the first releases', async () => {
    const first = await acquireLock(lockPath, { pollMs: 10 });
    let waited = false;
    let acquired = false;
    const second = acquireLock(lockPath, { pollMs: 10, onWait: () => (waited = true) }).then((l) => {
      acquired = true;
      return l;
    });
    await new Promise((r) => setTimeout(r, 60));
    expect(waited).toBe(true);
    expect(acquired).toBe(false);
    await first.release();
    await (await second).release();
    expect(acquired).toBe(true);
  });

  test('a lock of a live process on this host is respected', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      await fs.writeFile(lockPath, owner(child.pid as number));
      const ac = new AbortController();
      setTimeout(() => ac.abort(new Error('gave up')), 100);
      await expect(acquireLock(lockPath, { pollMs: 10, signal: ac.signal })).rejects.toThrow('gave up');
      expect(JSON.parse(await fs.readFile(lockPath, 'utf8')).token).toBe('someone-else');
    } finally {
      child.kill();
    }
  });

  test('a lock of a dead process is taken over', async () => {
    const child = spawn('true', { stdio: 'ignore' });
    await new Promise((r) => child.once('exit', r));
    await fs.writeFile(lockPath, owner(child.pid as number));
    const lock = await acquireLock(lockPath, { pollMs: 10 });
    expect(JSON.parse(await fs.readFile(lockPath, 'utf8')).pid).toBe(process.pid);
    await lock.release();
  });

  test('our own pid with a token we do not hold is a leftover of an earlier process', async () => {
    await fs.writeFile(lockPath, owner(process.pid, 'before-restart'));
    await (await acquireLock(lockPath, { pollMs: 10 })).release();
  });

  test('an untouched lock of another host is stale after staleMs; a fresh one is not', async () => {
    await fs.writeFile(lockPath, JSON.stringify({ pid: 1, host: 'elsewhere', token: 't', since: '' }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('still waiting')), 80);
    await expect(acquireLock(lockPath, { pollMs: 10, staleMs: 10_000, signal: ac.signal })).rejects.toThrow('still waiting');
    const old = new Date(Date.now() - 60_000);
    await fs.utimes(lockPath, old, old);
    await (await acquireLock(lockPath, { pollMs: 10, staleMs: 10_000 })).release();
  });

  test('an empty lock file (owner still writing it) is waited for, not broken', async () => {
    await fs.writeFile(lockPath, '');
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('waited')), 60);
    await expect(acquireLock(lockPath, { pollMs: 10, signal: ac.signal })).rejects.toThrow('waited');
  });

  test('release leaves a lock alone that is no longer ours', async () => {
    const lock = await acquireLock(lockPath);
    await fs.writeFile(lockPath, owner(process.pid, 'successor'));
    await lock.release();
    expect(JSON.parse(await fs.readFile(lockPath, 'utf8')).token).toBe('successor');
  });

  test('the holder keeps touching the lock so other hosts see it alive', async () => {
    const lock = await acquireLock(lockPath, { staleMs: 200 });
    const old = new Date(Date.now() - 60_000);
    await fs.utimes(lockPath, old, old);
    await new Promise((r) => setTimeout(r, 120));
    expect(Date.now() - (await fs.stat(lockPath)).mtimeMs).toBeLessThan(1_000);
    await lock.release();
  });
});
