import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './paths';
import { loadModel } from './model';

/**
 * The contents of disk volumes, kept only when the cluster runs real guests
 * (SANDBOX_GUESTS=qemu): then an import really converts the image (`qemu-img convert`,
 * as PVE::QemuServer::ImportDisk does), a resize really grows the file, a destroy
 * deletes it and a migration moves it. With process guests a volume is its metadata only.
 */

export function keepsContents(dir: string): boolean {
  try {
    return loadModel(dir).guests === 'qemu';
  } catch {
    return false;
  }
}

export function volumeFile(dir: string, node: string, storage: string, volname: string): string {
  return clusterPaths(dir).volumeData(node, storage, volname);
}

const qemuImg = (args: string[]) => execFileSync('qemu-img', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** A new volume: the image converted into it, or an empty disk of `sizeBytes`. */
export function writeVolume(file: string, format: string, sizeBytes: number, source?: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.part-${process.pid}`;
  try {
    if (source) {
      qemuImg(['convert', '-O', format, source, tmp]);
    } else qemuImg(['create', '-q', '-f', format, tmp, String(sizeBytes)]);
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/** Writes a raw image over the start of an existing volume (`qemu-img convert -n`), as an EFI disk gets its vars. */
export function copyIntoVolume(file: string, format: string, source: string): void {
  qemuImg(['convert', '-n', '-f', 'raw', '-O', format, source, file]);
}

export function growVolume(file: string, format: string, sizeBytes: number): void {
  if (fs.existsSync(file)) qemuImg(['resize', '-q', '-f', format, file, String(sizeBytes)]);
}

export function removeVolume(file: string): void {
  fs.rmSync(file, { force: true });
}

export function moveVolumeFile(from: string, to: string): void {
  if (!fs.existsSync(from)) return;
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.renameSync(from, to);
}

/**
 * Whether a disk holds anything a firmware could boot: a disk of nothing but unallocated
 * clusters (the process guests' stand-in images) reads as zeros and boots nothing.
 */
export function holdsData(file: string, format: string): boolean {
  try {
    const map = JSON.parse(execFileSync('qemu-img', ['map', '--output=json', '-f', format, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })) as Array<{ data: boolean }>;
    return map.some((e) => e.data);
  } catch {
    return false;
  }
}

/** A volume's contents copied into a new one (a clone), sparse; nothing when none are kept. */
export function copyVolumeFile(from: string, to: string, fromFormat: string, toFormat: string): void {
  if (!fs.existsSync(from)) return;
  fs.mkdirSync(path.dirname(to), { recursive: true });
  const tmp = `${to}.part-${process.pid}`;
  try {
    if (fromFormat === toFormat) execFileSync('cp', ['--sparse=always', '--reflink=auto', from, tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
    else qemuImg(['convert', '-f', fromFormat, '-O', toFormat, from, tmp]);
    fs.renameSync(tmp, to);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}
