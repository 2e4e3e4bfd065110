import fs from 'node:fs';
import { CliError } from '../errors';

/**
 * What `qemu-img info` would say about a source image: qcow2 (magic `QFI\xfb`, virtual
 * size in header bytes 24..31, big-endian), vmdk (magic `KDMV`), anything else raw with
 * the file's size (qemu-img's format probe falls back to raw, so does PVE's import).
 */
export interface ImageInfo {
  format: 'qcow2' | 'vmdk' | 'raw';
  virtualSize: number;
}

export function probeImage(file: string): ImageInfo {
  const st = fs.statSync(file);
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(512);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    if (n >= 4 && head.readUInt32BE(0) === 0x514649fb) {
      if (n < 32) throw new CliError(`qemu-img: Could not open '${file}': Image is not in qcow2 format`);
      return { format: 'qcow2', virtualSize: Number(head.readBigUInt64BE(24)) };
    }
    if (n >= 4 && head.toString('latin1', 0, 4) === 'KDMV') {
      // Hosted sparse extent header: capacity in sectors at offset 12 (little-endian).
      return { format: 'vmdk', virtualSize: Number(head.readBigUInt64LE(12)) * 512 };
    }
    return { format: 'raw', virtualSize: st.size };
  } finally {
    fs.closeSync(fd);
  }
}

/** PVE::Format::render_bytes($n, 1), as the import progress prints it. */
function renderBytes(value: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let unit = 0;
  if (value > 1023) {
    unit = Math.floor(Math.log(value) / Math.log(1024));
    value /= 1024 ** unit;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * The `transferred X of Y (P%)` lines qemu-server prints while `qemu-img convert -p` runs:
 * one per progress step, the last one usually twice.
 */
export function transferLines(size: number): string[] {
  const total = renderBytes(size);
  const lines: string[] = [];
  for (let pct = 0; pct <= 100; pct += 1) {
    const p = pct === 100 ? '100.00' : (pct + (pct % 3) / 100).toFixed(2);
    lines.push(`transferred ${renderBytes(Math.floor((size * Number(p)) / 100))} of ${total} (${p}%)`);
  }
  lines.push(lines[lines.length - 1]);
  return lines;
}
