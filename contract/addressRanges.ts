/**
 * Address pools: named IPv4 ranges a static address is handed out from, instead
 * of GATEWAY's /24 plus the VMID. Plain arithmetic on 32-bit numbers, free of Node.js
 * imports: the pool workflow picks addresses with it, the API and the worker check
 * requests with it.
 */

/** A pool as ADDRESS_POOLS gives it. */
export interface AddressPoolSetting {
  name: string;
  cidr: string;
  gateway: string;
  bridge?: string;
  vlan?: number;
  /** Single addresses (`a.b.c.d`) and inclusive ranges (`a.b.c.d-a.b.c.e`) never handed out. */
  reserved?: string[];
  /** How many leases one holder (leaseHolderOf) may have in the pool at once; absent: no limit. */
  maxLeasesPerHolder?: number;
}

/** A checked pool: its bounds as numbers, the first and last address that may be handed out. */
export interface AddressPool extends AddressPoolSetting {
  prefix: number;
  network: number;
  broadcast: number;
  gatewayN: number;
  reservedRanges: Array<[number, number]>;
}

const QUAD = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const POOL_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export const isIpv4 = (v: string): boolean => QUAD.test(v);

export function ipToNumber(ip: string): number {
  return ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

export function numberToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * Checks every pool and returns them with one problem a line (`ADDRESS_POOLS: …`), so an
 * operator fixes all of them at once: bad names and CIDRs, a gateway outside its pool,
 * reserved entries outside it, overlapping pools, duplicate names.
 */
export function checkAddressPools(settings: readonly AddressPoolSetting[]): { pools: AddressPool[]; problems: string[] } {
  const problems: string[] = [];
  const pools: AddressPool[] = [];
  const say = (name: string, what: string) => problems.push(`ADDRESS_POOLS: pool '${name}' ${what}`);
  for (const s of settings) {
    if (!POOL_NAME.test(s.name)) {
      problems.push(`ADDRESS_POOLS: pool name '${s.name}' must be lower-case letters, digits and -, at most 63 characters`);
      continue;
    }
    if (pools.some((p) => p.name === s.name)) {
      say(s.name, 'is named twice');
      continue;
    }
    const [base, bitsText] = s.cidr.split('/');
    const prefix = Number(bitsText);
    if (!isIpv4(base) || !/^\d{1,2}$/.test(bitsText ?? '') || prefix < 8 || prefix > 30) {
      say(s.name, `has cidr '${s.cidr}': it must be an IPv4 network like 192.0.2.0/24, with a prefix from /8 to /30`);
      continue;
    }
    const size = 2 ** (32 - prefix);
    const network = ipToNumber(base) - (ipToNumber(base) % size);
    if (network !== ipToNumber(base)) {
      say(s.name, `has cidr '${s.cidr}' with host bits set: the network is ${numberToIp(network)}/${prefix}`);
      continue;
    }
    const broadcast = network + size - 1;
    const inside = (n: number) => n > network && n < broadcast;
    if (!isIpv4(s.gateway) || !inside(ipToNumber(s.gateway))) {
      say(s.name, `has gateway '${s.gateway}' outside ${s.cidr} (or its network or broadcast address)`);
      continue;
    }
    const reservedRanges: Array<[number, number]> = [];
    let bad = false;
    for (const entry of s.reserved ?? []) {
      const [from, to = from] = entry.split('-');
      if (!isIpv4(from) || !isIpv4(to) || ipToNumber(from) > ipToNumber(to)) {
        say(s.name, `has reserved entry '${entry}': it must be an address or a range like 192.0.2.10-192.0.2.20`);
        bad = true;
      } else if (ipToNumber(from) < network || ipToNumber(to) > broadcast) {
        say(s.name, `has reserved entry '${entry}' outside ${s.cidr}`);
        bad = true;
      } else reservedRanges.push([ipToNumber(from), ipToNumber(to)]);
    }
    if (bad) continue;
    if (s.maxLeasesPerHolder !== undefined && !(Number.isInteger(s.maxLeasesPerHolder) && s.maxLeasesPerHolder >= 1)) {
      say(s.name, `has maxLeasesPerHolder ${String(s.maxLeasesPerHolder)}: it must be a whole number of at least 1 (leave it out for no limit)`);
      continue;
    }
    const other = pools.find((p) => network <= p.broadcast && p.network <= broadcast);
    if (other) {
      say(s.name, `(${s.cidr}) overlaps pool '${other.name}' (${other.cidr})`);
      continue;
    }
    pools.push({ ...s, prefix, network, broadcast, gatewayN: ipToNumber(s.gateway), reservedRanges });
  }
  return { pools, problems };
}

/** Whether the pool may hand out `n`: inside it, not its network, broadcast or gateway, not reserved. */
export function assignable(pool: AddressPool, n: number): boolean {
  return n > pool.network && n < pool.broadcast && n !== pool.gatewayN && !pool.reservedRanges.some(([a, b]) => n >= a && n <= b);
}

/** How many addresses the pool can hand out in all. */
export function poolSize(pool: AddressPool): number {
  let size = pool.broadcast - pool.network - 1;
  size -= 1; // the gateway
  // Reserved ranges may overlap each other and the gateway: count each address once.
  const seen = new Set<number>();
  for (const [a, b] of pool.reservedRanges) for (let n = a; n <= b; n++) if (assignable({ ...pool, reservedRanges: [] }, n)) seen.add(n);
  return size - seen.size;
}

/** The pool holding `ip` (as an address it may hand out), if any. */
export function poolOfAddress(pools: readonly AddressPool[], ip: string): AddressPool | undefined {
  if (!isIpv4(ip)) return undefined;
  const n = ipToNumber(ip);
  return pools.find((p) => n >= p.network && n <= p.broadcast);
}

/**
 * The lowest assignable address not in `taken`, or undefined when the pool is full. The
 * lowest, not a random one: the pool workflow serialises allocations, so there is no race
 * to spread, and an operator reads the leases in order.
 */
export function firstFree(pool: AddressPool, taken: ReadonlySet<string>): string | undefined {
  for (let n = pool.network + 1; n < pool.broadcast; n++) {
    if (assignable(pool, n) && !taken.has(numberToIp(n))) return numberToIp(n);
  }
  return undefined;
}

/** `ip=<addr>/<prefix>,gw=<gateway>`: ipconfig0 for an address of the pool. */
export function ipconfigOf(address: string, pool: Pick<AddressPool, 'prefix' | 'gateway'>): string {
  return `ip=${address}/${pool.prefix},gw=${pool.gateway}`;
}
