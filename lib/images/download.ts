import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { OsName } from '../../contract';
import { imageFor, type ChecksumAlgorithm, type ImageBases } from './catalog';
import { digestFile } from './hash';
import { acquireLock, type LockOwner } from './lock';
import { ProgressThrottle, type ProgressListener } from './progress';
import { fetchExpectedChecksum } from './remote';
import { recordPath } from './part';
import { transfer } from './transfer';

/**
 * The image cache: `<dataDir>/images/<os>-<version>/<fileName>`, always a file that matched
 * the checksum published at the time it was written. ensureImage returns it when it still
 * matches today's checksum and downloads it otherwise. Concurrent installs of one image
 * share one download: in this process through a promise map, across processes through a
 * lock file beside the image. A caller joining a download in progress shares it as it is:
 * its onProgress and signal count, its other options are those of the first caller.
 */

export interface EnsureImageOptions {
  os: OsName;
  version: string;
  /** config.dataDir; the cache lives under `<dataDir>/images`. */
  dataDir: string;
  /** config.imageBase. */
  bases: ImageBases;
  /** Throttled: at most once per 1% and per 500 ms, plus the first and the last report. */
  onProgress?: ProgressListener;
  /** Stops this caller's wait; the shared download stops when every caller has stopped. */
  signal?: AbortSignal;
  /** A transfer with no byte for this long fails retryably. Default 60 s. */
  idleTimeoutMs?: number;
  /** Called when another process holds the image's lock and we wait for it. */
  onWaitForLock?: (holder: LockOwner | undefined) => void;
  /** Lock file untouched this long counts as stale. Default 60 s. */
  lockStaleMs?: number;
}

export interface EnsureImageResult {
  /** Absolute path of the verified image. */
  path: string;
  /** Hex digest, verified against the published checksum. */
  sha: string;
  algorithm: ChecksumAlgorithm;
  bytes: number;
  /** False when the cached file was already up to date. */
  downloaded: boolean;
  url: string;
}

/** Where ensureImage keeps an image; exported so callers and tests need not rebuild it. */
export function imageCachePath(dataDir: string, os: OsName, version: string, bases: ImageBases): string {
  return path.resolve(dataDir, 'images', `${os}-${version}`, imageFor(os, version, bases).fileName);
}

interface Job {
  promise: Promise<EnsureImageResult>;
  controller: AbortController;
  listeners: Set<{ fn: ProgressListener }>;
  waiters: number;
  settled: boolean;
}

/** Downloads in progress in this process, by cache path and URL. */
// eslint-disable-next-line no-restricted-syntax -- the image cache is on disk, shared by every worker of the process
const jobs = new Map<string, Job>();

export async function ensureImage(opts: EnsureImageOptions): Promise<EnsureImageResult> {
  opts.signal?.throwIfAborted();
  const source = imageFor(opts.os, opts.version, opts.bases);
  const finalPath = imageCachePath(opts.dataDir, opts.os, opts.version, opts.bases);
  const key = `${finalPath}\n${source.url}`;
  let job = jobs.get(key);
  if (!job) {
    job = startJob(key, finalPath, opts);
    jobs.set(key, job);
  }
  return waitFor(key, job, opts);
}

function startJob(key: string, finalPath: string, opts: EnsureImageOptions): Job {
  const controller = new AbortController();
  const listeners = new Set<{ fn: ProgressListener }>();
  const throttle = new ProgressThrottle((p) => {
    for (const l of listeners) l.fn(p);
  });
  const job: Job = { controller, listeners, waiters: 0, settled: false, promise: undefined as never };
  job.promise = run(finalPath, opts, controller.signal, (r, t, final) => throttle.report(r, t, final)).finally(() => {
    job.settled = true;
    if (jobs.get(key) === job) jobs.delete(key);
  });
  // Every caller may have gone by the time it fails; the rejection is theirs, not the process's.
  job.promise.catch(() => undefined);
  return job;
}

/**
 * Joins a job until it settles or this caller's signal fires. The last caller to give up
 * stops the job and waits for it to wind down, so when its promise rejects no transfer is
 * running and the lock file is gone.
 */
async function waitFor(key: string, job: Job, opts: EnsureImageOptions): Promise<EnsureImageResult> {
  const listener = opts.onProgress ? { fn: opts.onProgress } : undefined;
  if (listener) job.listeners.add(listener);
  job.waiters++;
  // Leaving is counted synchronously: callers sharing one AbortSignal all abort in the
  // same tick, and the last of them must see that it is the last.
  let left = false;
  const leave = () => {
    if (left) return;
    left = true;
    job.waiters--;
    if (listener) job.listeners.delete(listener);
  };
  const { signal } = opts;
  let onAbort: (() => void) | undefined;
  try {
    if (!signal) return await job.promise;
    return await new Promise<EnsureImageResult>((resolve, reject) => {
      onAbort = () => {
        leave();
        if (job.waiters > 0 || job.settled) return reject(signal.reason);
        // Forget the job first so a new caller starts afresh (queueing on the lock file
        // until this one has let go).
        if (jobs.get(key) === job) jobs.delete(key);
        job.controller.abort(signal.reason);
        const rejectWithReason = () => reject(signal.reason);
        job.promise.then(rejectWithReason, rejectWithReason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      job.promise.then(resolve, reject);
    });
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    leave();
  }
}

type Report = (received: number, total: number | undefined, final?: boolean) => void;

async function run(finalPath: string, opts: EnsureImageOptions, signal: AbortSignal, report: Report): Promise<EnsureImageResult> {
  const source = imageFor(opts.os, opts.version, opts.bases);
  // Before the lock: a missing image or checksum fails fast without queueing.
  const expected = await fetchExpectedChecksum(source, signal);
  await fs.mkdir(path.dirname(finalPath), { recursive: true });
  const lock = await acquireLock(`${finalPath}.lock`, {
    signal,
    staleMs: opts.lockStaleMs,
    onWait: opts.onWaitForLock,
  });
  try {
    const base = { path: finalPath, algorithm: expected.algorithm, url: source.url };
    // Also covers the process that waited for the lock: the holder's result is here now.
    const cached = await digestFile(finalPath, expected.algorithm, signal).catch((err: NodeJS.ErrnoException) => {
      signal.throwIfAborted();
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (cached && cached.hex === expected.hex) {
      return { ...base, sha: cached.hex, bytes: cached.bytes, downloaded: false };
    }
    // Missing or outdated (upstream moved `latest`): download. The outdated file stays in
    // place until the new one replaces it, so an import reading it is not disturbed.
    const partPath = `${finalPath}.part`;
    const got = await transfer({
      url: source.url,
      partPath,
      expected,
      signal,
      idleTimeoutMs: opts.idleTimeoutMs ?? 60_000,
      onProgress: report,
    });
    await fs.rename(partPath, finalPath);
    await fs.rm(recordPath(partPath), { force: true });
    return { ...base, sha: got.hex, bytes: got.bytes, downloaded: true };
  } finally {
    await lock.release();
  }
}
