import http from 'node:http';

/**
 * The embedded Temporal UI, read-only. `temporal server start-dev` builds its UI server's
 * configuration itself (temporalio/cli internal/devserver/server.go `buildUIServer`) and
 * offers no flag, file or variable for the UI server's `disableWriteActions`, so its
 * terminate, cancel, reset, signal and start buttons act on the dev server for whoever opens
 * the page. The dev server's UI listens on a port of its own instead, and this proxy serves
 * it on TEMPORAL_UI_PORT as the UI server does with `disableWriteActions` set (ui-server
 * server/route/api.go `DisableWriteMiddleware`): reads and workflow queries pass, any other
 * method is 405, and the settings say `DisableWriteActions`, so the page hides its buttons.
 */
export interface ReadOnlyUi {
  url: string;
  stop(): Promise<void>;
}

/** What ui-server lets through with write actions disabled: GET, and POST of a workflow query. */
export function isUiRead(method: string, pathname: string): boolean {
  if (method === 'GET' || method === 'HEAD') return true;
  return method === 'POST' && /^\/api\/v1\/namespaces\/[^/]+\/workflows\/.+\/query\//.test(pathname);
}

const SETTINGS = '/api/v1/settings';

export async function startReadOnlyUi(opts: { host: string; port: number; upstreamPort: number }): Promise<ReadOnlyUi> {
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://ui').pathname;
    if (!isUiRead(req.method ?? 'GET', pathname)) {
      req.resume();
      res.writeHead(405, { 'Content-Type': 'application/json', Allow: 'GET, HEAD' });
      res.end(JSON.stringify({ message: 'the embedded Temporal UI is read-only: cancel or terminate through the QemuRun API or the temporal CLI' }));
      return;
    }
    // The settings are rewritten, so they are asked for uncompressed.
    const { 'accept-encoding': _accepted, ...plain } = req.headers;
    const upstream = http.request(
      { host: '127.0.0.1', port: opts.upstreamPort, method: req.method, path: req.url, headers: pathname === SETTINGS ? plain : req.headers },
      (up) => {
        if (pathname !== SETTINGS || up.statusCode !== 200) {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        up.on('data', (c: Buffer) => chunks.push(c));
        up.on('end', () => {
          let body: string;
          try {
            body = JSON.stringify({ ...(JSON.parse(Buffer.concat(chunks).toString('utf8')) as object), DisableWriteActions: true });
          } catch {
            res.writeHead(502, { 'Content-Type': 'application/json' }).end(JSON.stringify({ message: 'unreadable UI settings' }));
            return;
          }
          const { 'content-length': _length, ...headers } = up.headers;
          res.writeHead(200, { ...headers, 'Content-Length': Buffer.byteLength(body) });
          res.end(body);
        });
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ message: 'the Temporal UI does not answer' }));
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    url: `http://${opts.host}:${opts.port}`,
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
