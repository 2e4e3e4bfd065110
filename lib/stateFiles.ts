import fs from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from './atomicFile';

/**
 * The seed's state files, kept in DATA_DIR under the same meaning. A missing file is an
 * empty one: the seed refused to start without the disabled list, this does not.
 */

function readLines(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

export const stateFiles = (dataDir: string) => ({
  disabled: path.join(dataDir, 'disabled'),
  adminKeys: path.join(dataDir, 'admin_keys'),
  cpuType: path.join(dataDir, 'cpu-type'),
  markersResealed: path.join(dataDir, 'markers-resealed'),
});

/** VMIDs listed as `<vmid>:<name>` lines: the API refuses to control them. */
export function readDisabledVmids(dataDir: string): Set<number> {
  const ids = new Set<number>();
  for (const line of readLines(stateFiles(dataDir).disabled)) {
    const id = Number(line.split(':')[0]);
    if (Number.isInteger(id)) ids.add(id);
  }
  return ids;
}

/** Extra admin public keys injected into every VM, one per line. */
export function readAdminKeys(dataDir: string): string[] {
  return readLines(stateFiles(dataDir).adminKeys);
}

/**
 * The cached CPU type and the online nodes it was detected on. The first line is the type,
 * as in the seed's file; a `nodes=a,b` line follows when the product wrote it. A file
 * without that line (the seed's, or one written by hand) has `nodes` undefined.
 */
export function readCachedCpuBaseline(dataDir: string): { cpuType: string; nodes?: string[] } | undefined {
  const [cpuType, ...rest] = readLines(stateFiles(dataDir).cpuType);
  if (!cpuType) return undefined;
  const line = rest.find((l) => l.startsWith('nodes='));
  const nodes = line === undefined ? undefined : line.slice('nodes='.length).split(',').map((n) => n.trim()).filter(Boolean).sort();
  return nodes === undefined ? { cpuType } : { cpuType, nodes };
}

export function writeCachedCpuType(dataDir: string, cpuType: string, nodes?: string[]): void {
  const file = stateFiles(dataDir).cpuType;
  const nodeLine = nodes ? `nodes=${[...nodes].sort().join(',')}\n` : '';
  // Two workers detecting the baseline at once each write their own temporary file.
  // Private like every file in DATA_DIR, whatever the directory's own mode.
  writeFileAtomic(file, `${cpuType}\n${nodeLine}`, 0o600);
}

/**
 * Whether this service resealed its VMs' markers with their instance (lib/vm/reseal.ts):
 * from then on markers sealed in the form without one are refused. Written once, never removed.
 */
export function markersResealed(dataDir: string): boolean {
  return fs.existsSync(stateFiles(dataDir).markersResealed);
}

export function recordMarkersResealed(dataDir: string, note: string): void {
  writeFileAtomic(stateFiles(dataDir).markersResealed, `${note}\n`, 0o600);
}
