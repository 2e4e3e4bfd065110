import net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { HttpError, InvalidRequestError } from './errors';

/**
 * Cross-site request forgery. CORS only hides answers: a page anywhere can still make the
 * browser of someone on the management network send a "simple" POST (text/plain or a form
 * type, no preflight), and with ALLOW_IPS deciding by address and API_TOKEN unset, that
 * POST would run. So every mutating request must
 *   - come from no browser page, the API's own origin, or an origin CORS admits, and
 *   - say `Content-Type: application/json`, even with an empty body: a browser sends that
 *     type across origins only after a preflight, which CORS refuses for foreign origins.
 */

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isMutating(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase());
}

/**
 * Whether `origin` is the API's own: the same host and port as the request's Host, which
 * a browser sets itself. Only for an address or `localhost`: a page whose own name was
 * made to resolve to this server (DNS rebinding) would otherwise count as the API's own.
 * The scheme is not compared: behind a TLS-terminating proxy the page is https while this
 * server sees http.
 */
function isOwnOrigin(origin: string, req: Request): boolean {
  const host = req.get('Host');
  try {
    const url = new URL(origin);
    const name = url.hostname.replace(/^\[|\]$/g, '');
    if (!(net.isIP(name) || name === 'localhost')) return false;
    return host !== undefined && url.host === host.toLowerCase();
  } catch {
    return false;
  }
}

/** Why a mutating request looks cross-site, or undefined when it does not. */
function crossSiteReason(req: Request, allowOrigins: readonly string[]): string | undefined {
  const origin = req.get('Origin');
  if (origin !== undefined) {
    if (isOwnOrigin(origin, req) || allowOrigins.includes(origin.toLowerCase())) return undefined;
    return `origin ${JSON.stringify(origin.slice(0, 200))} may not change anything here`;
  }
  // Browsers send Origin with every cross-site POST; a cross-site request without one
  // cannot show where it came from, so it is not trusted either.
  if ((req.get('Sec-Fetch-Site') ?? '').toLowerCase() === 'cross-site') {
    return 'a cross-site request (Sec-Fetch-Site: cross-site) without an allowed Origin may not change anything here';
  }
  return undefined;
}

/** No body at all: neither a length above 0 nor a chunked one. */
export function hasBody(req: Request): boolean {
  return Number(req.get('Content-Length') ?? 0) > 0 || req.get('Transfer-Encoding') !== undefined;
}

export function refuseCrossSite(allowOrigins: readonly string[]) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!isMutating(req.method)) {
      next();
      return;
    }
    const reason = crossSiteReason(req, allowOrigins);
    if (reason) {
      next(new HttpError(403, reason));
      return;
    }
    // Read from the header itself: req.is() answers null when there is no body.
    const type = (req.get('Content-Type') ?? '').split(';')[0].trim().toLowerCase();
    const seedClient = req.get('Origin') === undefined && req.get('Content-Type') === undefined && !hasBody(req);
    if (type !== 'application/json' && !seedClient) {
      next(new InvalidRequestError('Content-Type must be application/json, even with an empty body', 415));
      return;
    }
    next();
  };
}
