import fs from 'node:fs';
import { z } from 'zod';
import { type AddressPool, checkAddressPools } from '../../contract';

/** One pool as ADDRESS_POOLS writes it; the arithmetic's checks come after (checkAddressPools). */
const poolSetting = z
  .object({
    name: z.string(),
    cidr: z.string(),
    gateway: z.string(),
    bridge: z.string().regex(/^[-_.A-Za-z0-9]{1,15}$/, 'must be a Proxmox bridge name like vmbr0').optional(),
    vlan: z.number().int().min(1).max(4094).optional(),
    reserved: z.array(z.string()).optional(),
    maxLeasesPerHolder: z.number().int().min(1).optional(),
  })
  .strict();

/**
 * ADDRESS_POOLS: a JSON list of pools, or the path of a file holding one (a value not
 * starting with `[`). Unset or empty: no pools, every VM's address is GATEWAY's /24 plus its
 * VMID, as before. Problems are pushed one a line.
 */
export function readAddressPools(value: string | undefined, problems: string[]): AddressPool[] {
  const text = value?.trim();
  if (!text) return [];
  let json: string;
  if (text.startsWith('[')) json = text;
  else {
    try {
      json = fs.readFileSync(text, 'utf8');
    } catch (err) {
      problems.push(`ADDRESS_POOLS: cannot read ${text} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      return [];
    }
  }
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    problems.push('ADDRESS_POOLS: is not JSON: give a list like [{"name":"lab","cidr":"192.0.2.0/24","gateway":"192.0.2.1"}] or a file holding one');
    return [];
  }
  const parsed = z.array(poolSetting).min(1).safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(`ADDRESS_POOLS: ${issue.path.join('.') || 'list'}: ${issue.message}`);
    return [];
  }
  const { pools, problems: found } = checkAddressPools(parsed.data);
  problems.push(...found);
  return pools;
}
