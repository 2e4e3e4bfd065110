/**
 * The cluster CPU baseline: classify each node's
 * /proc/cpuinfo flags (from `pvesh get /nodes/<n>/status`, `cpuinfo.flags`) into the
 * x86-64 levels Proxmox offers as CPU models, and give VMs the lowest level of all nodes,
 * so they can migrate anywhere.
 */

export type CpuLevel = 'x86-64-v1' | 'x86-64-v2' | 'x86-64-v2-AES' | 'x86-64-v3' | 'x86-64-v4';

/** What VMs get when the baseline cannot be detected: QEMU's oldest 64-bit model. */
export const FALLBACK_CPU_TYPE = 'kvm64';

/** Lowest first. */
export const CPU_LEVELS: readonly CpuLevel[] = ['x86-64-v1', 'x86-64-v2', 'x86-64-v2-AES', 'x86-64-v3', 'x86-64-v4'];

const V2 = ['cx16', 'lahf_lm', 'popcnt', 'sse4_1', 'sse4_2', 'ssse3'];
const AES = ['aes', 'pclmulqdq'];
// /proc/cpuinfo has no `lzcnt` flag: the kernel shows LZCNT as `abm` (see hasFlag).
const V3 = ['avx', 'avx2', 'bmi1', 'bmi2', 'f16c', 'fma', 'movbe', 'lzcnt', 'xsaveopt'];
const V4 = ['avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'];

function hasFlag(flags: ReadonlySet<string>, flag: string): boolean {
  return flags.has(flag) || (flag === 'lzcnt' && flags.has('abm'));
}

/**
 * The highest level whose flags are all present. Proxmox's x86-64-v3 and -v4 models are
 * built on x86-64-v2-AES (they enable aes), so v3 and v4 also require AES and PCLMULQDQ: a
 * CPU with AVX2 but no AES could not start a VM with the v3 model.
 */
export function cpuLevel(flags: readonly string[]): CpuLevel {
  const set = new Set(flags.map((f) => f.toLowerCase()));
  const all = (list: string[]) => list.every((f) => hasFlag(set, f));
  if (!all(V2)) return 'x86-64-v1';
  if (!all(AES)) return 'x86-64-v2';
  if (!all(V3)) return 'x86-64-v2-AES';
  if (!all(V4)) return 'x86-64-v3';
  return 'x86-64-v4';
}

/**
 * The level every node supports: the minimum. With no levels, or a node whose level is
 * unknown (its status could not be read), the baseline is `kvm64`.
 */
export function clusterBaseline(levels: ReadonlyArray<CpuLevel | undefined>): CpuLevel | typeof FALLBACK_CPU_TYPE {
  if (levels.length === 0 || levels.some((l) => l === undefined)) return FALLBACK_CPU_TYPE;
  return (levels as CpuLevel[]).reduce((a, b) => (CPU_LEVELS.indexOf(a) <= CPU_LEVELS.indexOf(b) ? a : b));
}

/**
 * Whether a VM CPU type provides at least `needed`. `host` passes everything (the node's
 * own CPU); `kvm64` and `qemu64` count as x86-64-v1, unknown types as below it.
 */
export function meetsLevel(cpuType: string, needed: string): boolean {
  const want = CPU_LEVELS.indexOf(needed as CpuLevel);
  if (want < 0) throw new Error(`unknown CPU level: ${needed}`);
  if (cpuType === 'host') return true;
  const have = cpuType === 'kvm64' || cpuType === 'qemu64' ? 0 : CPU_LEVELS.indexOf(cpuType as CpuLevel);
  return have >= want;
}
