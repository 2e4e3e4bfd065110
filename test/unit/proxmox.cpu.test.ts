import { readFileSync } from 'node:fs';
import path from 'node:path';
import { clusterBaseline, cpuLevel, meetsLevel } from '../../lib/proxmox/cpu';
import { parseNodeStatus } from '../../lib/proxmox/pvesh';

const BASE = 'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm'.split(' ');
const V2 = ['cx16', 'lahf_lm', 'popcnt', 'sse4_1', 'sse4_2', 'ssse3', 'pni'];
const AES = ['aes', 'pclmulqdq'];
const V3 = ['avx', 'avx2', 'bmi1', 'bmi2', 'f16c', 'fma', 'movbe', 'abm', 'xsave', 'xsaveopt'];
const V4 = ['avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'];

describe('cpuLevel', () => {
  it.each([
    ['plain x86-64 (kvm64-like)', BASE, 'x86-64-v1'],
    ['Nehalem-like: v2 without AES', [...BASE, ...V2], 'x86-64-v2'],
    ['Westmere-like: v2 with AES', [...BASE, ...V2, ...AES], 'x86-64-v2-AES'],
    ['Haswell-like', [...BASE, ...V2, ...AES, ...V3], 'x86-64-v3'],
    ['Skylake-SP-like', [...BASE, ...V2, ...AES, ...V3, ...V4], 'x86-64-v4'],
    ['v2 minus one flag (no popcnt)', [...BASE, ...V2.filter((f) => f !== 'popcnt'), ...AES], 'x86-64-v1'],
    ['v3 minus movbe', [...BASE, ...V2, ...AES, ...V3.filter((f) => f !== 'movbe')], 'x86-64-v2-AES'],
    ['AVX2 but no AES: Proxmox v3 needs aes', [...BASE, ...V2, ...V3], 'x86-64-v2'],
    ['v4 minus avx512vl', [...BASE, ...V2, ...AES, ...V3, ...V4.slice(0, 4)], 'x86-64-v3'],
    ['no flags at all', [], 'x86-64-v1'],
  ])('%s → %s', (_what, flags, level) => {
    expect(cpuLevel(flags)).toBe(level);
  });

  it('reads lzcnt as /proc/cpuinfo spells it (abm), or literally', () => {
    const v3 = [...BASE, ...V2, ...AES, ...V3];
    expect(cpuLevel(v3.filter((f) => f !== 'abm'))).toBe('x86-64-v2-AES');
    expect(cpuLevel([...v3.filter((f) => f !== 'abm'), 'lzcnt'])).toBe('x86-64-v3');
  });

  it('classifies the node status fixture (an EPYC 7302: AVX2, no AVX-512) as v3', () => {
    const status = parseNodeStatus(readFileSync(path.join(__dirname, '..', 'fixtures', 'proxmox', 'pvesh-node-status.json'), 'utf8'));
    expect(cpuLevel(status.cpuinfo.flags)).toBe('x86-64-v3');
  });
});

describe('clusterBaseline', () => {
  it('takes the minimum over the nodes', () => {
    expect(clusterBaseline(['x86-64-v4', 'x86-64-v2-AES', 'x86-64-v3'])).toBe('x86-64-v2-AES');
    expect(clusterBaseline(['x86-64-v3'])).toBe('x86-64-v3');
    expect(clusterBaseline(['x86-64-v2', 'x86-64-v2-AES'])).toBe('x86-64-v2');
  });
  it('falls back to kvm64 when detection failed', () => {
    expect(clusterBaseline([])).toBe('kvm64');
    expect(clusterBaseline(['x86-64-v3', undefined])).toBe('kvm64');
  });
});

describe('meetsLevel', () => {
  it('compares CPU types with a required level', () => {
    expect(meetsLevel('x86-64-v3', 'x86-64-v3')).toBe(true);
    expect(meetsLevel('x86-64-v4', 'x86-64-v3')).toBe(true);
    expect(meetsLevel('x86-64-v2-AES', 'x86-64-v3')).toBe(false);
    expect(meetsLevel('kvm64', 'x86-64-v2')).toBe(false);
    expect(meetsLevel('kvm64', 'x86-64-v1')).toBe(true);
    expect(meetsLevel('host', 'x86-64-v4')).toBe(true);
    expect(() => meetsLevel('host', 'x86-64-v9')).toThrow(/unknown CPU level/);
  });
});
