import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { type AddressLease, type AddressPool, ipToNumber, isIpv4, poolSize } from '../contract';
import { releaseNamedLease } from '../lib/addressPools/leases';
import { readLeasesOr502 } from './poolLeases';
import { HttpError, InvalidRequestError } from './errors';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

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

/**
 * `GET /address-pools`: ADDRESS_POOLS with each pool's leases, from its workflow.
 * `DELETE /address-pools/:pool/leases/:address`: an admin gives one address back: a lease
 * the reconciler keeps (its owner still runs, a node could not be read) or that an operator
 * knows better about. Released by name, so a lease made between the read and the release stays.
 */
export const addressPoolRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: AddressPoolRouteDeps) => deps,
  routes: [
    {
      method: 'GET',
      path: '/address-pools',
      summary: 'Address pools and their leases',
      answers: { 200: { description: 'ADDRESS_POOLS, each with its leases (none configured: an empty list)', json: answers.addressPools }, 502: err("the pools' leases could not be read from Temporal") },
      handle: async ({ config, client }, _req, res) => {
        const pools = config.addressPools as readonly AddressPool[];
        const leases = await readLeasesOr502(client, pools, "the address pools' leases");
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
      },
    },
    {
      method: 'DELETE',
      path: '/address-pools/:pool/leases/:address',
      summary: 'Release one address lease (the VM, if one still uses the address, is not touched)',
      role: 'admin',
      answers: {
        200: { description: 'the lease released', json: answers.leaseReleased },
        400: err('not an IPv4 address'),
        404: err('no such pool, or no lease of that address in it'),
        502: err("the pool's leases could not be read from Temporal"),
      },
      handle: async ({ config, client }, req, res) => {
        const { pool: name, address } = req.params as { pool: string; address: string };
        const pool = (config.addressPools as readonly AddressPool[]).find((p) => p.name === name);
        if (!pool) throw new HttpError(404, `no address pool named '${name}' (ADDRESS_POOLS names ${config.addressPools.map((p) => p.name).join(', ') || 'none'})`);
        if (!isIpv4(address)) throw new InvalidRequestError('address: must be an IPv4 address like 192.0.2.10');
        const leases = await readLeasesOr502(client, [pool], `address pool '${name}''s leases`);
        const lease = leases.get(name)?.find((l) => l.address === address);
        if (!lease) throw new HttpError(404, `address pool '${name}' has no lease of ${address}`);
        const released = await releaseNamedLease(client, name, lease);
        if (released.length === 0) throw new HttpError(404, `address pool '${name}' has no lease of ${address} any more`);
        res.json({ success: true, pool: name, released: released[0] });
      },
    },
  ],
});
