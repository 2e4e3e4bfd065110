import { Router, Request, Response } from 'express';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { type AddressLease, type AddressPool, ipToNumber, poolSize } from '../contract';
import { readLeases } from '../lib/addressPools/leases';
import { HttpError } from './errors';

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
  return router;
}
