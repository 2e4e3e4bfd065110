import { Router, Request, Response } from 'express';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { type AddressLease, type AddressPool, ipToNumber, isIpv4, poolSize } from '../contract';
import { readLeases, releaseNamedLease } from '../lib/addressPools/leases';
import { HttpError, InvalidRequestError } from './errors';
import { requireRole } from './guard';

export interface AddressPoolRouteDeps {
  config: Config;
  client: Client;
}

export interface AddressPoolEntry {
  name: string;
  cidr: string;
  gateway: string;
  bridge?: string;
  vlan?: number;
  reserved: string[];
  /** Addresses the pool hands out in all: not its network, broadcast, gateway or reserved ones. */
  size: number;
  used: number;
  free: number;
  leases: AddressLease[];
}

/** `GET /address-pools`: ADDRESS_POOLS with each pool's leases, from its workflow. */
export function addressPoolRoutes({ config, client }: AddressPoolRouteDeps): Router {
  const router = Router();
  router.get('/address-pools', async (_req: Request, res: Response) => {
    const pools = config.addressPools as readonly AddressPool[];
    const leases = await readLeases(client, pools).catch((err: Error) => err);
    if (leases instanceof Error) throw new HttpError(502, `could not read the address pools' leases: ${leases.message}`);
    const entries = pools.map((p): AddressPoolEntry => {
      const held = [...(leases.get(p.name) ?? [])].sort((a, b) => ipToNumber(a.address) - ipToNumber(b.address));
      const size = poolSize(p);
      return {
        name: p.name,
        cidr: p.cidr,
        gateway: p.gateway,
        ...(p.bridge !== undefined ? { bridge: p.bridge } : {}),
        ...(p.vlan !== undefined ? { vlan: p.vlan } : {}),
        reserved: [...(p.reserved ?? [])],
        size,
        used: held.length,
        free: size - held.length,
        leases: held,
      };
    });
    res.json({ count: entries.length, pools: entries });
  });

  /**
   * An admin gives one address back: a lease the reconciler keeps (its owner still runs, a
   * node could not be read) or that an operator knows better about. Released by name, so
   * a lease made between the read and the release stays.
   */
  router.delete('/address-pools/:pool/leases/:address', requireRole(config, 'admin'), async (req: Request, res: Response) => {
    const { pool: name, address } = req.params as { pool: string; address: string };
    const pool = (config.addressPools as readonly AddressPool[]).find((p) => p.name === name);
    if (!pool) throw new HttpError(404, `no address pool named '${name}' (ADDRESS_POOLS names ${config.addressPools.map((p) => p.name).join(', ') || 'none'})`);
    if (!isIpv4(address)) throw new InvalidRequestError('address: must be an IPv4 address like 192.0.2.10');
    const leases = await readLeases(client, [pool]).catch((err: Error) => err);
    if (leases instanceof Error) throw new HttpError(502, `could not read address pool '${name}''s leases: ${leases.message}`);
    const lease = leases.get(name)?.find((l) => l.address === address);
    if (!lease) throw new HttpError(404, `address pool '${name}' has no lease of ${address}`);
    const released = await releaseNamedLease(client, name, lease);
    if (released.length === 0) throw new HttpError(404, `address pool '${name}' has no lease of ${address} any more`);
    res.json({ success: true, pool: name, released: released[0] });
  });
  return router;
}
