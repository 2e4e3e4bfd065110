import fs from 'node:fs';
import http from 'node:http';

/**
 * The one way out of a real guest's network: an HTTP server on a unix socket in the
 * cluster directory, which each guest reaches at http://10.0.2.100 (./network.ts). It
 * answers GET and HEAD below `/debian/` and `/debian-security/` from Debian's archive (the
 * host's, `upstream`) and refuses everything else, so a guest's apt-get works while
 * nothing else a guest sends leaves the machine. The socket path does not change across
 * restarts of the service, so guests that outlive it keep their way out.
 */
export interface ArchiveProxy {
  stop(): Promise<void>;
}

const ALLOWED = /^\/(debian|debian-security)\/[A-Za-z0-9._~+%/-]*$/;
const PASSED_HEADERS = ['content-type', 'content-length', 'last-modified', 'etag', 'accept-ranges', 'content-range'];

export async function startArchiveProxy(socket: string, upstream: string): Promise<ArchiveProxy> {
  const base = new URL(upstream);
  if (base.protocol !== 'http:') throw new Error(`the guests' archive must be an http:// URL, got '${upstream}'`);
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !ALLOWED.test(path) || path.includes('..')) {
      res.writeHead(403, { 'content-type': 'text/plain' }).end('only Debian archive downloads pass here\n');
      return;
    }
    const headers: Record<string, string> = {};
    for (const h of ['range', 'if-modified-since', 'if-range', 'if-none-match']) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const out = http.request(
      { host: base.hostname, port: base.port || 80, path: base.pathname.replace(/\/$/, '') + path, method: req.method, headers, timeout: 60_000 },
      (up) => {
        const pass: Record<string, string> = {};
        for (const h of PASSED_HEADERS) {
          const v = up.headers[h];
          if (typeof v === 'string') pass[h] = v;
        }
        res.writeHead(up.statusCode ?? 502, pass);
        up.pipe(res);
      },
    );
    out.on('timeout', () => out.destroy(new Error('timeout')));
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('archive unreachable\n');
      else res.destroy();
    });
    req.on('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    out.end();
  });
  fs.rmSync(socket, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(socket, { force: true });
    },
  };
}
