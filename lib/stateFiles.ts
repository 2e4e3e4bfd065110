import fs from 'node:fs';
import path from 'node:path';

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

export function readCachedCpuType(dataDir: string): string | undefined {
  return readLines(stateFiles(dataDir).cpuType)[0];
}

export function writeCachedCpuType(dataDir: string, cpuType: string): void {
  const file = stateFiles(dataDir).cpuType;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(`${file}.tmp`, `${cpuType}\n`);
  fs.renameSync(`${file}.tmp`, file);
}
