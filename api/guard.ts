import crypto from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import type { NextFunction, Request, Response } from 'express';
import type { Config } from '../lib/config';
import { HttpError } from './errors';

/** `::ffff:127.0.0.1` and `127.0.0.1` are the same caller. */
export function normaliseIp(ip: string | undefined): string {
  if (!ip) return '';
  return ip.startsWith('::ffff:') && net.isIPv4(ip.slice(7)) ? ip.slice(7) : ip;
}

/**
 * The caller's address: the socket's, unless the socket is a configured trusted proxy,
 * in which case the right-most X-Forwarded-For entry not itself a trusted proxy. Off by
 * default, so nobody can claim an allowed address with a header.
 */
export function clientIp(req: Request, trustedProxies: string[]): string {
  let ip = normaliseIp(req.socket.remoteAddress);
  if (!trustedProxies.includes(ip)) return ip;
  const chain = (req.get('X-Forwarded-For') ?? '').split(',').map((s) => normaliseIp(s.trim())).filter(Boolean);
  while (chain.length > 0 && trustedProxies.includes(ip)) ip = chain.pop()!;
  return ip;
}

export function isAllowed(ip: string, allowIps: string[]): boolean {
  return allowIps.includes('0.0.0.0') || allowIps.includes(ip);
}

/** Guards mutating endpoints: ALLOW_IPS, then the optional bearer token. */
export function requireMutationAccess(config: Config) {
  return (req: Request, res: Response, next: NextFunction) => {
    const ip = clientIp(req, config.trustedProxies);
    if (!isAllowed(ip, config.allowIps)) {
      next(new HttpError(403, `client ${ip} is not in ALLOW_IPS`));
      return;
    }
    if (config.apiToken && !tokenMatches(bearerToken(req.get('Authorization')), config.apiToken)) {
      next(new HttpError(401, 'missing or wrong bearer token'));
      return;
    }
    next();
  };
}

/** The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1). */
export function bearerToken(header: string | undefined): string | undefined {
  return /^bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header ?? '')?.[1];
}

/** Compared in constant time, so the answer's timing does not leak how much of a guess was right. */
function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

function ipv4ToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => (n << 8) + Number(o), 0) >>> 0;
}

const PRIVATE_V4 = [
  ['10.0.0.0', 8],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['127.0.0.0', 8],
] as const;

function inCidr(ip: string, base: string, bits: number): boolean {
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (ipv4ToInt(ip) & mask) === (ipv4ToInt(base) & mask);
}

/** The server's own IPv4 subnets, read once. */
export function localSubnets(): Array<{ address: string; bits: number }> {
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
export function isAllowedOrigin(origin: string, subnets = localSubnets()): boolean {
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    return false;
  }
  if (!net.isIPv4(host)) return false;
  if (!PRIVATE_V4.some(([b, bits]) => inCidr(host, b, bits))) return false;
  return subnets.some((s) => inCidr(host, s.address, s.bits));
}

export function cors(subnets: Array<{ address: string; bits: number }> = localSubnets()) {
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('Origin');
    if (origin && isAllowedOrigin(origin, subnets)) {
      res.set({
        'Access-Control-Allow-Origin': origin,
        Vary: 'Origin',
        'Access-Control-Allow-Methods': 'GET, POST, DELETE, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, Authorization, Last-Event-ID, Idempotency-Key',
        'Access-Control-Expose-Headers': 'X-Workflow-Id',
        'Access-Control-Max-Age': '600',
      });
    }
    if (req.method === 'OPTIONS') {
      res.status(origin && isAllowedOrigin(origin, subnets) ? 204 : 403).end();
      return;
    }
    next();
  };
}
