import http from 'node:http';

/** One stream as a client saw it: each event's id with the moment it arrived. */
export interface WatchedStream {
  status: number;
  workflowId: string;
  arrivals: Array<{ id: number; at: number; status: string; message: string }>;
  closed: boolean;
}

/**
 * A plain SSE client that notes when every event arrives. `onOpen` runs once the
 * response headers are in (the workflow id is known from then on).
 */
export function watch(
  url: string,
  opts: { body?: unknown; headers?: Record<string, string>; onOpen?: (workflowId: string) => void; timeoutMs?: number } = {},
): Promise<WatchedStream> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = http.request(url, {
      method: payload ? 'POST' : 'GET',
      headers: { ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {}), ...opts.headers },
    });
    const timer = setTimeout(() => req.destroy(new Error(`stream timed out: ${url}`)), opts.timeoutMs ?? 600_000);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      const out: WatchedStream = { status: res.statusCode ?? 0, workflowId: String(res.headers['x-workflow-id'] ?? ''), arrivals: [], closed: false };
      opts.onOpen?.(out.workflowId);
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const now = Date.now();
        buffer += chunk;
        let idx;
        while ((idx = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          const id = /^id: (\d+)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (/^event: close$/m.test(block)) out.closed = true;
          else if (id && data) {
            const e = JSON.parse(data) as { status: string; message: string };
            out.arrivals.push({ id: Number(id), at: now, status: e.status, message: e.message });
          }
        }
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve(out);
      });
      res.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    req.end(payload);
  });
}
