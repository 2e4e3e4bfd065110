import path from 'node:path';
import express, { type RequestHandler } from 'express';
import { REPO_ROOT } from '../lib/repoRoot';

/** The web console's files: plain HTML, CSS and ES modules, served as they are (no build step). */
export const CONSOLE_DIR = path.join(REPO_ROOT, 'console');

/**
 * The page may load and call nothing but this origin: no inline script, no other host, not
 * framed by another site. The token a user types stays in the page (sessionStorage) and
 * goes only to this origin's API.
 */
const HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/**
 * Serves the console at `/` from static files. It costs the API nothing while nobody has
 * the page open: no state, no timers; a request reaches it only when no route matched.
 */
export function consoleFiles(dir = CONSOLE_DIR): RequestHandler {
  return express.static(dir, {
    index: 'index.html',
    dotfiles: 'ignore',
    // Small files that change with each release: revalidated, never stale after an upgrade.
    cacheControl: true,
    maxAge: 0,
    setHeaders: (res) => res.set(HEADERS),
  });
}
