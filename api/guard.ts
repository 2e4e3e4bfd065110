import net from 'node:net';
import os from 'node:os';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Config } from '../lib/config';
import { findToken, roleAtLeast, type Role } from '../lib/apiTokens';
import { addressMatcher } from '../lib/network';
import { isMutating } from './crossSite';
import { HttpError } from './errors';

/** `::ffff:127.0.0.1` and `127.0.0.1` are the same caller. */
function normaliseIp(ip: string | undefined): string {
  if (!ip) return '';
  return ip.startsWith('::ffff:') && net.isIPv4(ip.slice(7)) ? ip.slice(7) : ip;
}

/**
 * The caller's address: Express's `req.ip` under its `trust proxy` setting, which
 * createApp sets to TRUSTED_PROXIES: the socket's address, unless the socket is a trusted
 * proxy, in which case the right-most X-Forwarded-For entry not itself a trusted proxy.
 * Off by default, so nobody can claim an allowed address with a header.
 */
export function clientIp(req: Request): string {
  return normaliseIp(req.ip);
}

/** Whether ALLOW_IPS admits a caller: `0.0.0.0` admits every one. */
function allowedIps(allowIps: readonly string[]): (ip: string) => boolean {
  if (allowIps.includes('0.0.0.0')) return () => true;
  return addressMatcher(allowIps);
}

/** Who a request is, once its bearer token matched: the token's role, name and tenant. */
export interface Principal {
  role: Role;
  name: string;
  tenant: string;
}

const PRINCIPAL = Symbol('qemurun.principal');
type WithPrincipal = Response & { [PRINCIPAL]?: Principal | null };

/**
 * The token holder behind the request, or undefined without a token (or with no tokens
 * configured); a token that matches none is `wrong`. Worked out once per request.
 */
export function principalOf(req: Request, res: Response, config: Config): Principal | undefined | 'wrong' {
  const cached = (res as WithPrincipal)[PRINCIPAL];
  if (cached !== undefined) return cached ?? undefined;
  const header = req.get('Authorization');
  if (header === undefined || config.apiTokens.length === 0) {
    (res as WithPrincipal)[PRINCIPAL] = null;
    return undefined;
  }
  const token = findToken(config.apiTokens, bearerToken(header));
  if (!token) return 'wrong';
  const principal = { role: token.role, name: token.name, tenant: token.tenant };
  (res as WithPrincipal)[PRINCIPAL] = principal;
  return principal;
}

/** The token holder's name, for the record of who started what; undefined without tokens. */
export function actorOf(res: Response): string | undefined {
  return (res as WithPrincipal)[PRINCIPAL]?.name;
}

/** The caller's tenant, what a VM it installs is recorded under; undefined without tokens. */
export function tenantOf(res: Response): string | undefined {
  return (res as WithPrincipal)[PRINCIPAL]?.tenant;
}

/**
 * The tenant whose VMs the caller sees and acts on, or undefined for every VM: the admin
 * role, no tokens configured, or a read without a token (ANONYMOUS_ACCESS=read opens reads
 * to everyone who can reach the API, so a scope there would protect nothing).
 */
export function tenantScope(res: Response): string | undefined {
  const p = (res as WithPrincipal)[PRINCIPAL];
  return p && p.role !== 'admin' ? p.tenant : undefined;
}

/** Whether the caller holds `role` (any caller does when no tokens are configured). */
export function holdsRole(res: Response, config: Config, role: Role): boolean {
  if (config.apiTokens.length === 0) return true;
  const p = (res as WithPrincipal)[PRINCIPAL];
  return p ? roleAtLeast(p.role, role) : false;
}

/**
 * Guards an endpoint that changes something: the caller's address in ALLOW_IPS, then,
 * when tokens are configured, a bearer token with at least `role`. 401 without a token
 * (or with a wrong one), 403 naming the role needed with a token of a lesser role.
 */
export function requireRole(config: Config, role: Role): RequestHandler {
  const isAllowed = allowedIps(config.allowIps);
  return (req: Request, res: Response, next: NextFunction) => {
    const ip = clientIp(req);
    if (!isAllowed(ip)) {
      next(new HttpError(403, `client ${ip} is not in ALLOW_IPS`));
      return;
    }
    if (config.apiTokens.length === 0) return next();
    const p = principalOf(req, res, config);
    if (p === undefined || p === 'wrong') {
      next(new HttpError(401, 'missing or wrong bearer token'));
      return;
    }
    if (!roleAtLeast(p.role, role)) {
      next(new HttpError(403, `this needs the ${role} role; token ${p.name} has the ${p.role} role`, { role }));
      return;
    }
    next();
  };
}

/**
 * The most a caller may do here, as requireRole would judge it: the token's role (every
 * role without tokens configured, `read` for a caller without one), and no more than
 * `read` from an address outside ALLOW_IPS. What a page shows and offers follows it.
 */
export function effectiveRole(config: Config): (req: Request, res: Response) => { name: string | null; role: Role } {
  const isAllowed = allowedIps(config.allowIps);
  return (req, res) => {
    const p = principalOf(req, res, config);
    const name = typeof p === 'object' ? p.name : null;
    const held: Role = config.apiTokens.length === 0 ? 'admin' : typeof p === 'object' ? p.role : 'read';
    return { name, role: isAllowed(clientIp(req)) ? held : 'read' };
  };
}

/**
 * Reads: with tokens configured, a wrong token is 401 everywhere, and with
 * ANONYMOUS_ACCESS=none a read without a token is 401 too. Changes have their own guard.
 */
export function readAccess(config: Config): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(req, res, config);
    if (p === 'wrong') {
      next(new HttpError(401, 'missing or wrong bearer token'));
      return;
    }
    if (p === undefined && config.apiTokens.length > 0 && config.anonymousAccess === 'none' && !isMutating(req.method)) {
      next(new HttpError(401, 'this needs a bearer token with the read role (ANONYMOUS_ACCESS=none)', { role: 'read' }));
      return;
    }
    next();
  };
}

/** The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1). */
function bearerToken(header: string | undefined): string | undefined {
  return /^bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header ?? '')?.[1];
}

/**
 * Who may read /metrics and readiness details (node names, addresses, error texts): the
 * addresses of DIAGNOSTICS_IPS (the machine's own tools, 127.0.0.1 and ::1, by default),
 * ALLOW_IPS, and token holders; everyone with PUBLIC_DIAGNOSTICS=true. Not all of
 * 127.0.0.0/8: in sandbox mode the VMs' addresses are there, and a local proxy or container
 * may connect from any of them on behalf of someone else.
 */
export function diagnosticsReaders(config: Config): (req: Request, res: Response) => boolean {
  const isAllowed = allowedIps(config.allowIps);
  const isNamed = addressMatcher(config.diagnosticsIps);
  return (req, res) => {
    if (config.publicDiagnostics) return true;
    const ip = clientIp(req);
    if (isNamed(ip) || isAllowed(ip)) return true;
    return typeof principalOf(req, res, config) === 'object';
  };
}

/** The private IPv4 ranges the seed's CORS rule admits origins from. */
const isPrivateV4 = addressMatcher(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.0/8']);

/** The server's own IPv4 subnets, read once. */
function localSubnets(): Array<{ address: string; bits: number }> {
  const out: Array<{ address: string; bits: number }> = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family === 'IPv4' && a.cidr) out.push({ address: a.address, bits: Number(a.cidr.split('/')[1]) });
    }
  }
  return out;
}

/**
 * The seed's CORS rule: an origin is admitted when its host is a private IPv4 address in
 * one of the server's own subnets.
 */
function allowedOrigins(subnets: ReadonlyArray<{ address: string; bits: number }> = localSubnets()): (origin: string) => boolean {
  const inLocalSubnet = addressMatcher(subnets.map((s) => `${s.address}/${s.bits}`));
  return (origin) => {
    let host: string;
    try {
      host = new URL(origin).hostname;
    } catch {
      return false;
    }
    return net.isIPv4(host) && isPrivateV4(host) && inLocalSubnet(host);
  };
}

const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * CORS: an origin in ALLOW_ORIGINS may call every endpoint; one the seed's rule admits (a
 * private address in the server's subnets) may only read, since another machine's page
 * on the management network is no more trusted than any other page.
 */
export function cors(config: Pick<Config, 'allowOrigins'>, subnets: ReadonlyArray<{ address: string; bits: number }> = localSubnets()) {
  const isAllowedOrigin = allowedOrigins(subnets);
  const access = (origin: string | undefined): 'all' | 'read' | undefined => {
    if (!origin) return undefined;
    if (config.allowOrigins.includes(origin.toLowerCase())) return 'all';
    return isAllowedOrigin(origin) ? 'read' : undefined;
  };
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('Origin');
    const allowed = access(origin);
    if (allowed) {
      res.set({
        'Access-Control-Allow-Origin': origin,
        Vary: 'Origin',
        'Access-Control-Allow-Methods': allowed === 'all' ? 'GET, POST, DELETE, OPTIONS' : 'GET, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, Authorization, Last-Event-ID, Idempotency-Key',
        'Access-Control-Expose-Headers': 'X-Workflow-Id',
        'Access-Control-Max-Age': '600',
      });
    }
    if (req.method === 'OPTIONS') {
      const wanted = (req.get('Access-Control-Request-Method') ?? 'GET').toUpperCase();
      res.status(allowed === 'all' || (allowed === 'read' && READ_METHODS.has(wanted)) ? 204 : 403).end();
      return;
    }
    next();
  };
}
