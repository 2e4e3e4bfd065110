import http from 'node:http';
import net from 'node:net';

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json?: { success?: boolean; message?: string; [k: string]: unknown };
}

function parseJson(text: string): RawAnswer['json'] {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * One HTTP request with full control of method, headers and body bytes (no defaults
 * added beyond Host and Content-Length). The connection is not reused.
 */
export function send(
  base: string,
  req: { method?: string; path: string; headers?: Record<string, string | undefined>; body?: string | Buffer; timeoutMs?: number; /** The local address to connect from (127.0.0.x). */ from?: string },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers ?? {})) if (v !== undefined) headers[k] = v;
    const framing = Object.keys(headers).some((k) => /^(content-length|transfer-encoding)$/i.test(k));
    if (req.body !== undefined && !framing) {
      headers['Content-Length'] = String(Buffer.byteLength(req.body));
    }
    const r = http.request({
      host: url.hostname,
      port: url.port,
      method: req.method ?? (req.body !== undefined ? 'POST' : 'GET'),
      path: req.path,
      headers,
      agent: false,
      ...(req.from ? { localAddress: req.from } : {}),
    });
    const timer = setTimeout(() => r.destroy(new Error(`timed out: ${req.method} ${req.path}`)), req.timeoutMs ?? 30_000);
    r.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    r.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: parseJson(text) });
      });
    });
    // A server refusing a large body early may close before all of it is written.
    r.on('socket', (s) => s.on('error', () => undefined));
    if (req.body !== undefined) r.write(req.body);
    r.end();
  });
}

/**
 * Bytes straight onto a socket, for what an HTTP client refuses to send (NUL or CR in a
 * header, non-Latin-1 header bytes). Resolves with the status line and body the server
 * wrote before closing (or after `idleMs` without data).
 */
export function sendRaw(base: string, bytes: Buffer | string, idleMs = 3000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const socket = net.connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    let idle: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(idle);
      socket.destroy();
      const raw = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = raw.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      const headers: http.IncomingHttpHeaders = {};
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const text = rest.join('\r\n\r\n');
      resolve({ status, headers, text, json: parseJson(text) });
    };
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(finish, idleMs);
    };
    socket.on('connect', () => {
      socket.write(bytes);
      arm();
    });
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      arm();
    });
    socket.on('end', finish);
    socket.on('error', (err) => (chunks.length > 0 ? finish() : reject(err)));
  });
}
