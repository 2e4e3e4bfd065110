/**
 * Parsers for the text that qm and pvesm print. Each accepts
 * the variants real releases produce; fixtures in test/fixtures/proxmox are real captures.
 */

/** `qm status` state: running, stopped, or a QMP state (paused, prelaunch, ...). */
export type VmRunState = 'running' | 'stopped' | (string & {});

/** `status: running` → 'running'. */
export function parseQmStatus(stdout: string): VmRunState {
  const m = /^status:\s*(\S+)\s*$/m.exec(stdout);
  if (!m) throw new Error(`unexpected qm status output: ${JSON.stringify(stdout.slice(0, 200))}`);
  return m[1];
}

export interface QmListEntry {
  vmid: number;
  name: string;
  status: VmRunState;
  /** MiB. */
  memoryMb: number;
  /** GiB, 0 when the boot disk is unknown. */
  bootDiskGb: number;
  /** 0 when stopped. */
  pid: number;
}

/**
 * `qm list`. No VMs prints nothing at all. Columns are split on whitespace, not by position:
 * a name longer than 20 characters pushes the others out, and a name has no spaces.
 */
export function parseQmList(stdout: string): QmListEntry[] {
  const rows: QmListEntry[] = [];
  for (const line of stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || !/^\d+$/.test(f[0])) continue; // header, blank
    rows.push({
      vmid: Number(f[0]),
      name: f[1],
      status: f[2],
      memoryMb: Number(f[3]),
      bootDiskGb: Number(f[4]),
      pid: Number(f[5]),
    });
  }
  return rows;
}

export interface ImportedDisk {
  /** Where the volume went: `unused0`, or the `--target-disk` (`scsi0`). */
  slot: string;
  /** `local-lvm:vm-100-disk-0`, `local:100/vm-100-disk-0.raw`. */
  volid: string;
}

/**
 * The final line of `qm importdisk`, in both formats:
 * - qemu-server < 8.2.7: `Successfully imported disk as 'unused0:local-lvm:vm-100-disk-0'`
 * - qemu-server ≥ 8.2.7: `unused0: successfully imported disk 'local-lvm:vm-100-disk-0'`
 * With --target-disk the second form carries the full drive string; the volume ID is its
 * part before the first comma.
 */
export function parseImportDisk(stdout: string): ImportedDisk {
  const lines = stdout.split('\n').reverse();
  for (const line of lines) {
    const old = /Successfully imported disk as '([a-z]+\d+):(.+)'/.exec(line);
    if (old) return { slot: old[1], volid: old[2].split(',')[0] };
    const cur = /^([a-z]+\d+): successfully imported disk '([^']+)'/.exec(line.trim());
    if (cur) return { slot: cur[1], volid: cur[2].split(',')[0] };
  }
  throw new Error(`qm importdisk printed no 'successfully imported disk' line: ${JSON.stringify(stdout.slice(-300))}`);
}

export interface TransferProgress {
  transferredBytes: number;
  totalBytes: number;
  percent: number;
}

const BYTE_UNITS: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4, PiB: 1024 ** 5 };

/**
 * `transferred 498.3 GiB of 500.0 GiB (99.67%)` from importdisk and disk imports; block
 * jobs print `mirror-scsi0: transferred ... (3.13%) in 1s`. Undefined for other lines.
 */
export function parseTransferProgress(line: string): TransferProgress | undefined {
  const m = /transferred:?\s+([\d.]+)\s*(B|KiB|MiB|GiB|TiB|PiB)\s+of\s+([\d.]+)\s*(B|KiB|MiB|GiB|TiB|PiB)\s+\(([\d.]+)%\)/.exec(line);
  if (!m) return undefined;
  return {
    transferredBytes: Math.round(Number(m[1]) * BYTE_UNITS[m[2]]),
    totalBytes: Math.round(Number(m[3]) * BYTE_UNITS[m[4]]),
    percent: Number(m[5]),
  };
}

export interface StorageStatus {
  /** Storage ID, e.g. `local-lvm`. */
  name: string;
  /** dir, lvmthin, zfspool, nfs, pbs, ... */
  type: string;
  /** active, inactive, or disabled. */
  status: 'active' | 'inactive' | 'disabled' | (string & {});
  totalBytes: number;
  usedBytes: number;
  availableBytes: number;
  /** Used/Total in percent; undefined when pvesm prints `N/A` (disabled storage). */
  usedPercent?: number;
}

/**
 * `pvesm status`. Sizes are printed in KiB. Older releases printed no header, so a first
 * line starting with `Name` is skipped rather than required.
 */
export function parsePvesmStatus(stdout: string): StorageStatus[] {
  const rows: StorageStatus[] = [];
  for (const line of stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 7 || f[0] === 'Name') continue;
    const kib = (s: string) => (/^\d+$/.test(s) ? Number(s) * 1024 : 0);
    const pct = /^([\d.]+)%$/.exec(f[6]);
    rows.push({
      name: f[0],
      type: f[1],
      status: f[2],
      totalBytes: kib(f[3]),
      usedBytes: kib(f[4]),
      availableBytes: kib(f[5]),
      ...(pct ? { usedPercent: Number(pct[1]) } : {}),
    });
  }
  return rows;
}

export interface MigrationLine {
  /** `YYYY-MM-DD HH:MM:SS` (or old `Mon DD HH:MM:SS`); absent on block-job lines. */
  time?: string;
  message: string;
  /** `ERROR:` lines. */
  error: boolean;
  /** Set on `migration finished successfully (duration HH:MM:SS)`. */
  finished?: { durationSec: number };
  /** Set on `migration aborted (duration ...): <why>`. */
  aborted?: { reason: string };
  progress?: TransferProgress;
}

/** One line of `qm migrate` output. */
export function parseMigrationLine(line: string): MigrationLine {
  const ts = /^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) (.*)$/.exec(line);
  const time = ts?.[1];
  let message = ts ? ts[2] : line;
  const error = /^ERROR: /.test(message);
  if (error) message = message.slice('ERROR: '.length);
  const out: MigrationLine = { ...(time ? { time } : {}), message, error };
  const done = /^migration finished successfully \(duration (\d+):(\d{2}):(\d{2})\)/.exec(message);
  if (done) out.finished = { durationSec: Number(done[1]) * 3600 + Number(done[2]) * 60 + Number(done[3]) };
  const aborted = /^migration aborted \(duration [^)]*\): (.*)$/.exec(message);
  if (aborted) out.aborted = { reason: aborted[1] };
  const progress = parseTransferProgress(message);
  if (progress) out.progress = progress;
  return out;
}

/**
 * The `password:` line of `qm cloudinit dump <vmid> user` (the stored cipassword, a crypt
 * hash); undefined when the user-data sets none.
 */
export function parseCloudinitUserPassword(stdout: string): string | undefined {
  const m = /^password: (\S+)$/m.exec(stdout);
  return m && /^\$[0-9a-z]+\$/.test(m[1]) ? m[1] : undefined;
}

/** Each output line of a transfer for `onProgress`, with the numbers of a `transferred X of Y (p%)` line. */
export function withTransferProgress(
  onProgress: ((line: string, progress?: TransferProgress) => void) | undefined,
): ((line: string) => void) | undefined {
  return onProgress && ((line) => onProgress(line, parseTransferProgress(line)));
}

/**
 * Reads a migration's output as it streams: each line parsed for `onLine`, and the
 * duration the last line reports kept for the answer.
 */
export function migrationOutput(onLine?: (line: string, parsed: MigrationLine) => void): {
  onLine: (line: string) => void;
  result(): { durationSec?: number };
} {
  let durationSec: number | undefined;
  return {
    onLine(line) {
      const parsed = parseMigrationLine(line);
      if (parsed.finished) durationSec = parsed.finished.durationSec;
      onLine?.(line, parsed);
    },
    result: () => (durationSec === undefined ? {} : { durationSec }),
  };
}

/** `GET /pools`' answer (`[{ poolid, comment? }]`) as the pools' ids. */
export function poolIdsOf(data: unknown): string[] {
  if (!Array.isArray(data)) return [];
  return data.flatMap((p: unknown) => (p && typeof p === 'object' && typeof (p as { poolid?: unknown }).poolid === 'string' ? [(p as { poolid: string }).poolid] : []));
}
