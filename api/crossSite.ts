import type { NextFunction, Request, Response } from 'express';
import { isAllowedOrigin, localSubnets } from './guard';

/**
 * Cross-site request forgery. CORS only hides answers: a page anywhere can still make the
 * browser of someone on the management network send a "simple" POST (text/plain or a form
 * type, no preflight), and with ALLOW_IPS deciding by address and API_TOKEN unset, that
 * POST would run. So every mutating request must
 *   - come from no browser page, the API's own origin, or an origin CORS admits, and
 *   - say `Content-Type: application/json`, even with an empty body: a browser sends that
 *     type across origins only after a preflight, which CORS refuses for foreign origins.
 */

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isMutating(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase());
}

/** The origin a browser reports for a page served by this API itself. */
function ownOrigin(req: Request): string | undefined {
  const host = req.get('Host');
  return host ? `${req.protocol}://${host}`.toLowerCase() : undefined;
}

/** Why a mutating request looks cross-site, or undefined when it does not. */
export function crossSiteReason(
  req: Request,
  subnets: Array<{ address: string; bits: number }>,
): string | undefined {
  const origin = req.get('Origin');
  if (origin !== undefined) {
    if (origin.toLowerCase() === ownOrigin(req) || isAllowedOrigin(origin, subnets)) return undefined;
    return `origin ${JSON.stringify(origin.slice(0, 200))} may not change anything here`;
  }
  // Browsers send Origin with every cross-site POST; a cross-site request without one
  // cannot show where it came from, so it is not trusted either.
  if ((req.get('Sec-Fetch-Site') ?? '').toLowerCase() === 'cross-site') {
    return 'a cross-site request (Sec-Fetch-Site: cross-site) without an allowed Origin may not change anything here';
  }
  return undefined;
}

export function refuseCrossSite(subnets: Array<{ address: string; bits: number }> = localSubnets()) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!isMutating(req.method)) {
      next();
      return;
    }
    const reason = crossSiteReason(req, subnets);
    if (reason) {
      res.status(403).json({ success: false, message: reason });
      return;
    }
    // Read from the header itself: req.is() answers null when there is no body.
    const type = (req.get('Content-Type') ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/json') {
      res.status(415).json({ success: false, message: 'please check your input: Content-Type must be application/json, even with an empty body' });
      return;
    }
    next();
  };
}
