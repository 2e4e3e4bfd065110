import { createHash } from 'node:crypto';

const CLUSTER = 4096;

/**
 * A minimal qcow2 v3 image: header, a one-entry refcount table, one refcount block, an
 * empty L1 table (every guest cluster unallocated, reads as zeros), then free clusters
 * filled with `seed`-derived bytes so each image hashes differently. Written by code so
 * the mirror needs no qemu-img at run time; `qemu-img check` passes on the result.
 */
export function fakeQcow2(totalBytes: number, seed: string, virtualSize = 2 * 1024 ** 3): Buffer {
  const clusters = Math.max(5, Math.ceil(totalBytes / CLUSTER));
  const buf = Buffer.alloc(clusters * CLUSTER);
  const l1Entries = Math.ceil(virtualSize / (CLUSTER * (CLUSTER / 8)));
  const l1Clusters = Math.ceil((l1Entries * 8) / CLUSTER);
  buf.write('QFI\xfb', 0, 'latin1');
  buf.writeUInt32BE(3, 4); // version
  buf.writeUInt32BE(12, 20); // cluster_bits: 4 KiB clusters keep the file small
  buf.writeBigUInt64BE(BigInt(virtualSize), 24);
  buf.writeUInt32BE(l1Entries, 36); // l1_size
  buf.writeBigUInt64BE(BigInt(3 * CLUSTER), 40); // l1_table_offset
  buf.writeBigUInt64BE(BigInt(1 * CLUSTER), 48); // refcount_table_offset
  buf.writeUInt32BE(1, 56); // refcount_table_clusters
  buf.writeUInt32BE(4, 96); // refcount_order: 16-bit refcounts
  buf.writeUInt32BE(104, 100); // header_length
  buf.writeBigUInt64BE(BigInt(2 * CLUSTER), CLUSTER); // refcount table -> refcount block
  for (let c = 0; c < 3 + l1Clusters; c++) buf.writeUInt16BE(1, 2 * CLUSTER + c * 2); // used clusters
  let block = createHash('sha256').update(seed).digest();
  for (let off = (3 + l1Clusters) * CLUSTER; off < buf.length; off += block.length) {
    block.copy(buf, off);
    block = createHash('sha256').update(block).digest();
  }
  return buf;
}
