import fs from 'node:fs';
import { clusterPaths } from './paths';
import { createExclusive, readIfExists, writeFileAtomic } from './files';

/**
 * Which node owns which VMID, cluster-wide. pmxcfs derives this from the config files and
 * refuses a second config for a VMID that exists anywhere; the sandbox gets the same
 * guarantee from one entry per VMID created with O_EXCL semantics, claimed before the
 * config is written and released after it is gone.
 */

/** Claims `vmid` for `node`. Returns the owner's name if someone else already holds it. */
export function claimVmid(dir: string, vmid: number, node: string): string | undefined {
  const entry = clusterPaths(dir).vmlistEntry(vmid);
  if (createExclusive(entry, node)) return undefined;
  return readIfExists(entry)?.trim() || node;
}

export function moveVmid(dir: string, vmid: number, node: string): void {
  const entry = clusterPaths(dir).vmlistEntry(vmid);
  // The entry's time is the VM's creation (resources.ts): a migration keeps it.
  const created = fs.statSync(entry, { throwIfNoEntry: false })?.mtime;
  writeFileAtomic(entry, node);
  if (created) fs.utimesSync(entry, created, created);
}

export function releaseVmid(dir: string, vmid: number): void {
  fs.rmSync(clusterPaths(dir).vmlistEntry(vmid), { force: true });
}

/** The node whose directory holds `<vmid>.conf` (or which is creating it), if any. */
export function vmOwner(dir: string, vmid: number): string | undefined {
  const p = clusterPaths(dir);
  const claimed = readIfExists(p.vmlistEntry(vmid))?.trim();
  if (claimed) return claimed;
  return listVms(dir).find((v) => v.vmid === vmid)?.node;
}

/** Every VM config in the cluster, like pmxcfs's vmlist. */
export function listVms(dir: string): Array<{ vmid: number; node: string }> {
  const p = clusterPaths(dir);
  const out: Array<{ vmid: number; node: string }> = [];
  let nodes: string[] = [];
  try {
    nodes = fs.readdirSync(`${p.root}/nodes`);
  } catch {
    return out;
  }
  for (const node of nodes) {
    let files: string[] = [];
    try {
      files = fs.readdirSync(p.qemuDir(node));
    } catch {
      continue;
    }
    for (const f of files) {
      const m = /^(\d+)\.conf$/.exec(f);
      if (m) out.push({ vmid: Number(m[1]), node });
    }
  }
  return out.sort((a, b) => a.vmid - b.vmid);
}
