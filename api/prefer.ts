import type { Request } from 'express';

/**
 * `Prefer: respond-async` (RFC 7240): the client wants the install started and a status
 * resource to poll, not an event stream. Preferences are a comma-separated list whose
 * names are case-insensitive and may carry parameters (`respond-async; x=1, wait=10`).
 */
export function prefersAsync(req: Request): boolean {
  const header = req.get('Prefer');
  if (!header) return false;
  return header.split(',').some((pref) => pref.split(/[;=]/)[0].trim().toLowerCase() === 'respond-async');
}
