/**
 * The CLI's only way to QemuRun: HTTP to the API at `QEMURUN_URL`, with the bearer token
 * from `API_TOKEN` on every call (reads ignore it, mutating routes need it when the
 * server sets one).
 */

export interface ClientOptions {
  url: string;
  token?: string;
}

export interface ApiAnswer {
  status: number;
  headers: Headers;
  /** The JSON body, or the text when the body is not JSON. */
  body: unknown;
}

/** The server could not be reached at all (refused, reset, DNS): not an answer. */
export class UnreachableError extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(`cannot reach QemuRun at ${url}: ${describeCause(cause)}`);
  }
}

function describeCause(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}

export class ApiClient {
  readonly base: string;

  constructor(private readonly opts: ClientOptions) {
    this.base = opts.url.replace(/\/+$/, '');
  }

  /** `/api/...` paths resolved against the server's URL (with or without its own `/api`). */
  url(path: string): string {
    const base = this.base.endsWith('/api') ? this.base.slice(0, -4) : this.base;
    return `${base}${path}`;
  }

  /**
   * Sends one request. A body-less POST still gets `Content-Type: application/json`: the
   * API refuses any other type on mutating routes, as a guard against cross-site forms.
   */
  async send(method: string, path: string, init: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    const headers: Record<string, string> = { Accept: 'application/json, text/event-stream;q=0.9, text/plain;q=0.8', ...init.headers };
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    if (this.opts.token) headers.Authorization = `Bearer ${this.opts.token}`;
    try {
      return await fetch(this.url(path), {
        method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: init.signal,
      });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw new UnreachableError(this.base, err);
    }
  }

  /** A request whose whole answer is read: JSON when it parses, else text. */
  async call(method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}): Promise<ApiAnswer> {
    const res = await this.send(method, path, init);
    return { status: res.status, headers: res.headers, body: await readBody(res) };
  }
}

export async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').includes('json') || /^\s*[[{]/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

export function isEventStream(res: Response): boolean {
  return (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

/** The `message` of the API's JSON errors, or the text it answered. */
export function messageOf(body: unknown): string {
  if (body && typeof body === 'object' && 'message' in body && typeof body.message === 'string') return body.message;
  return typeof body === 'string' ? body.trim() : JSON.stringify(body);
}
