import http from 'node:http';

export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

export interface SseResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Parsed frames (comments dropped). */
  frames: SseFrame[];
  /** `data` of message frames, JSON-parsed. */
  events: Array<{ step: string; status: string; message: string; id?: number }>;
  /** Raw body, for non-SSE answers. */
  body: string;
  closed: boolean;
}

/**
 * A real HTTP client for the SSE endpoints. `stopAfter` drops the connection after that
 * many message frames, as a client losing its network would.
 */
export function requestSse(
  url: string,
  opts: {
    method?: string;
    body?: unknown;
    headers?: Record<string, string>;
    stopAfter?: number;
    timeoutMs?: number;
    /** Sees each event as it arrives. */
    onEvent?: (e: SseResponse['events'][number]) => void;
  } = {},
): Promise<SseResponse> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    const method = opts.method ?? (payload ? 'POST' : 'GET');
    const req = http.request(url, {
      method,
      headers: {
        // Mutating routes want a JSON type even without a body (api/crossSite.ts).
        ...(method !== 'GET' ? { 'Content-Type': 'application/json' } : {}),
        ...(payload ? { 'Content-Length': Buffer.byteLength(payload) } : {}),
        ...opts.headers,
      },
    });
    const timer = setTimeout(() => req.destroy(new Error(`SSE request timed out: ${url}`)), opts.timeoutMs ?? 180_000);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      const out: SseResponse = { status: res.statusCode ?? 0, headers: res.headers, frames: [], events: [], body: '', closed: false };
      let buffer = '';
      const finish = () => {
        clearTimeout(timer);
        resolve(out);
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        out.body += chunk;
        buffer += chunk;
        let idx;
        while ((idx = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          const frame: SseFrame = { data: '' };
          let isComment = true;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            isComment = false;
            const [field, ...rest] = line.split(':');
            const value = rest.join(':').replace(/^ /, '');
            if (field === 'id') frame.id = value;
            else if (field === 'event') frame.event = value;
            else if (field === 'data') frame.data += value;
          }
          if (isComment) continue;
          out.frames.push(frame);
          if (frame.event === 'close') out.closed = true;
          else if (frame.data) {
            out.events.push({ ...JSON.parse(frame.data), ...(frame.id ? { id: Number(frame.id) } : {}) });
            opts.onEvent?.(out.events[out.events.length - 1]);
            if (opts.stopAfter !== undefined && out.events.length >= opts.stopAfter) {
              res.destroy();
              finish();
              return;
            }
          }
        }
      });
      res.on('end', finish);
      res.on('close', finish);
    });
    if (payload) req.write(payload);
    req.end();
  });
}
