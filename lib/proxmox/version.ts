import type { PveVersion } from './pvesh';

/**
 * The oldest Proxmox VE release the install works on. Every install sends `--ciupgrade 0`
 * (qemu-server 8.0.2 and later) and gives VMs the `x86-64-v2-AES` / `x86-64-v3` CPU models
 * (qemu-server 8.0.4 and later); Proxmox VE 8.0 is the first release shipping both. On 7.x,
 * `qm set` refuses the option and `qm start` the CPU model, half-way through an install.
 */
export const MIN_PVE_RELEASE = '8.0';

function releaseNumbers(release: string): [number, number] {
  const m = /^(\d+)\.(\d+)/.exec(release);
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

/** Whether a node's release is at least MIN_PVE_RELEASE. */
export function supportedRelease(v: Pick<PveVersion, 'release'>): boolean {
  const [major, minor] = releaseNumbers(v.release);
  const [minMajor, minMinor] = releaseNumbers(MIN_PVE_RELEASE);
  return major > minMajor || (major === minMajor && minor >= minMinor);
}
