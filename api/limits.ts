import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { clientIp } from './guard';
import { HttpError } from './errors';

/**
 * Limits that keep one client from holding the API: a deadline for every request that
 * is not an event stream, a cap on open event streams per client address, JSON answers
 * for requests Node's HTTP parser refuses, and a strict reading of JSON bodies (UTF-8
 * only, no duplicate keys) so that every parser in a chain sees the same request.
 */

// ---- request deadline ---------------------------------------------------------------

const TIMER = Symbol('qemurun.requestTimer');
const HELD_OPEN = Symbol('qemurun.heldOpen');

const BASE_MS = Symbol('qemurun.requestDeadline');

type Tracked = Response & { [TIMER]?: NodeJS.Timeout; [HELD_OPEN]?: boolean; [BASE_MS]?: number };

/**
 * What a route declares about its answer, next to the route (see `limitsFor`), instead of
 * a list of paths here that every new route must remember to join.
 */
export interface RouteLimits {
  /**
   * The answer is an event stream: it takes a stream slot before any work starts (so a
   * refused install starts no workflow), and the request deadline stops once it opens.
   * `unless`: requests of the route that answer at once instead (`Prefer: respond-async`).
   */
  stream?: true | { unless(req: Request): boolean };
  /**
   * The answer waits for an operation's workflow (`ok` once a VM is shut down, stopped,
   * destroyed or resized). An ACPI shutdown alone may take minutes, so these get
   * OPERATION_TIMEOUT_MS (or the general deadline, if that is longer).
   */
  long?: true;
}
const OPERATION_TIMEOUT_MS = 15 * 60_000;

/** The middlewares that apply a route's declared limits; put them first in the route. */
export function limitsFor(limits: RouteLimits = {}, limiter?: SseLimiter): RequestHandler[] {
  const handlers: RequestHandler[] = [];
  if (limits.long) handlers.push((req, res, next) => {
    const base = (res as Tracked)[BASE_MS];
    if (base !== undefined && base > 0) arm(req, res, Math.max(base, OPERATION_TIMEOUT_MS));
    next();
  });
  const { stream } = limits;
  if (stream) handlers.push((req, res, next) => {
    if (stream !== true && stream.unless(req)) return next();
    if (!limiter) return next();
    limiter.admit(req, res, next);
  });
  return handlers;
}

/**
 * Answers a request that has not been answered within `ms`: `408` while its body is still
 * arriving (a slow or stalled client), `503` when the server itself is slow. An event
 * stream, or an answer that waits for a workflow, is exempt from the moment it is held open
 * (see `answerHeldOpen`): such answers last minutes.
 * `ms` = 0 turns the deadline off.
 */
export function requestTimeout(ms: number): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (ms <= 0) return next();
    (res as Tracked)[BASE_MS] = ms;
    arm(req, res, ms);
    res.once('finish', () => clearTimeout((res as Tracked)[TIMER]));
    res.once('close', () => clearTimeout((res as Tracked)[TIMER]));
    next();
  };
}

/** (Re)starts the deadline of one request: a route that declares a long answer moves it. */
function arm(req: Request, res: Response, deadline: number): void {
  const tracked = res as Tracked;
  clearTimeout(tracked[TIMER]);
  const timer = setTimeout(() => {
    if (tracked[HELD_OPEN] || res.writableEnded) return;
    const receiving = !req.complete;
    // An answer already on its way (headers sent) is left to finish.
    if (res.headersSent) return;
    const seconds = `${+(deadline / 1000).toFixed(3)}s`;
    // An operation route names its workflow before waiting for it: say where to follow it.
    const workflowId = res.getHeader('X-Workflow-Id');
    res
      .status(receiving ? 408 : 503)
      .set('Connection', 'close')
      .json({
        success: false,
        message: receiving
          ? `request timed out: the request body did not arrive within ${seconds}`
          : workflowId
            ? `request timed out: no answer within ${seconds}; workflow ${String(workflowId)} is still running, follow it at /api/workflows/${String(workflowId)}`
            : `request timed out: no answer within ${seconds}; retry later`,
      });
    // A client still sending, or a handler that never answers, must not keep the socket.
    setTimeout(() => req.socket.destroy(), 1000).unref();
  }, deadline);
  timer.unref();
  tracked[TIMER] = timer;
}

// ---- event streams per client ---------------------------------------------------------

const SLOT = Symbol('qemurun.sseSlot');
const RETRY_LATER = { 'Retry-After': '10' };
type WithSlot = Response & { [SLOT]?: boolean };

export interface SseLimiter {
  /** Middleware for a streaming route: refuses the request past either cap (429 per client, 503 in total) before it does anything. */
  admit: RequestHandler;
  /** Counts a stream that did not pass through `admit` (a route that did not declare it streams). */
  track(req: Request, res: Response): void;
  /** Open streams of one client (for tests and diagnostics). */
  openFor(ip: string): number;
  /** Open streams of all clients. */
  openTotal(): number;
  /** Open streams of anonymous readers. */
  openAnonymous(): number;
}

/**
 * Three caps: per client address and per token (`maxPerClient`, one client cannot take
 * every slot, nor one token used from several addresses), in
 * total (`maxTotal`, many addresses together cannot load the server: every open stream
 * costs a Temporal query loop), and for anonymous readers (`maxAnonymous`: streams of
 * callers with no token that change nothing, so that watchers anyone can open never take
 * the slots an install's own stream needs). 0 turns a cap off.
 */
export function sseLimiter(opts: {
  maxPerClient: number;
  maxTotal?: number;
  maxAnonymous?: number;
  /** Whether the request is an anonymous reader's; default: none is. */
  isAnonymous?(req: Request, res: Response): boolean;
  /** The name of the request's token, if it has one: its streams count against `maxPerClient` too. */
  tokenOf?(req: Request, res: Response): string | undefined;
}): SseLimiter {
  // Addresses and tokens in one map, told apart by their prefix.
  const open = new Map<string, number>();
  const count = (key: string, by: number) => {
    const n = (open.get(key) ?? 0) + by;
    if (n <= 0) open.delete(key);
    else open.set(key, n);
  };
  let total = 0;
  let anonymous = 0;
  const maxTotal = opts.maxTotal ?? 0;
  const maxAnonymous = opts.maxAnonymous ?? 0;
  const counting = () => opts.maxPerClient > 0 || maxTotal > 0 || maxAnonymous > 0;
  const keysOf = (ip: string, req: Request, res: Response) => {
    const token = opts.tokenOf?.(req, res);
    return { ip: `ip:${ip}`, token: token === undefined ? undefined : `token:${token}`, name: token };
  };
  const take = (ip: string, req: Request, res: Response) => {
    const anon = opts.isAnonymous?.(req, res) ?? false;
    const { ip: byIp, token: byToken } = keysOf(ip, req, res);
    const keys = byToken ? [byIp, byToken] : [byIp];
    for (const k of keys) count(k, 1);
    total++;
    if (anon) anonymous++;
    (res as WithSlot)[SLOT] = true;
    res.once('close', () => {
      total--;
      if (anon) anonymous--;
      for (const k of keys) count(k, -1);
    });
  };
  return {
    admit(req, res, next) {
      if (!counting()) return next();
      const ip = clientIp(req);
      if (maxTotal > 0 && total >= maxTotal) {
        // The server is full, not this client at fault: 503, as for any overload.
        next(new HttpError(503, `too many open event streams: the server already serves ${maxTotal} (SSE_MAX_TOTAL); retry later`, {}, RETRY_LATER));
        return;
      }
      if (maxAnonymous > 0 && anonymous >= maxAnonymous && opts.isAnonymous?.(req, res)) {
        next(
          new HttpError(
            503,
            `too many open event streams without a token: the server already serves ${maxAnonymous} (SSE_MAX_ANONYMOUS); retry later, or send a bearer token`,
            {},
            RETRY_LATER,
          ),
        );
        return;
      }
      const keys = keysOf(ip, req, res);
      if (opts.maxPerClient > 0 && (open.get(keys.ip) ?? 0) >= opts.maxPerClient) {
        next(new HttpError(429, `too many open event streams: client ${ip} already has ${opts.maxPerClient} (SSE_MAX_PER_CLIENT); close one and retry`, {}, RETRY_LATER));
        return;
      }
      if (opts.maxPerClient > 0 && keys.token && (open.get(keys.token) ?? 0) >= opts.maxPerClient) {
        next(new HttpError(429, `too many open event streams: token ${keys.name} already has ${opts.maxPerClient} (SSE_MAX_PER_CLIENT); close one and retry`, {}, RETRY_LATER));
        return;
      }
      take(ip, req, res);
      next();
    },
    track(req, res) {
      if (!counting() || (res as WithSlot)[SLOT]) return;
      take(clientIp(req), req, res);
    },
    openFor: (ip) => open.get(`ip:${ip}`) ?? 0,
    openTotal: () => total,
    openAnonymous: () => anonymous,
  };
}

/**
 * From here on the response is held open for minutes: an event stream (`openEventStream`)
 * or an answer that waits for its workflow to end. The request deadline no longer applies,
 * and the answer counts against the client's caps on open streams like a stream does.
 */
export function answerHeldOpen(res: Response, limiter: SseLimiter | undefined): void {
  const tracked = res as Tracked;
  tracked[HELD_OPEN] = true;
  clearTimeout(tracked[TIMER]);
  if (res.req) limiter?.track(res.req, res);
}

// ---- strict JSON bodies ---------------------------------------------------------------

/** A body error with a type the app's error handler maps to a JSON answer. */
class BodyError extends Error {
  constructor(
    message: string,
    readonly type: 'qemurun.charset' | 'qemurun.utf8' | 'qemurun.duplicate.key' | 'qemurun.bom',
  ) {
    super(message);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * `verify` hook of express.json: the body must be UTF-8 (RFC 8259; a lenient decoder would
 * turn invalid bytes into U+FFFD and carry on) and no object may repeat a key (parsers
 * disagree on which one wins: a proxy could check one value and the API use another).
 */
export function verifyJsonBody(_req: unknown, _res: unknown, buf: Buffer, encoding: string | null): void {
  if (encoding && !/^utf-?8$/i.test(encoding)) {
    throw new BodyError(`Content-Type charset must be utf-8, not ${encoding}`, 'qemurun.charset');
  }
  // RFC 8259 §8.1: a sender must not add one. TextDecoder drops it silently, so a body with
  // one would pass here and might not in a stricter parser behind a proxy.
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) {
    throw new BodyError('body starts with a byte order mark (U+FEFF); send the JSON without it', 'qemurun.bom');
  }
  let text: string;
  try {
    text = utf8.decode(buf);
  } catch {
    throw new BodyError('body is not valid UTF-8', 'qemurun.utf8');
  }
  let ok = true;
  try {
    JSON.parse(text);
  } catch {
    ok = false; // express.json reports it
  }
  const dup = ok ? findDuplicateKey(text) : undefined;
  if (dup !== undefined) throw new BodyError(`body repeats the key "${dup.key}"${dup.path ? ` in ${dup.path}` : ''}`, 'qemurun.duplicate.key');
}

/**
 * The first key that appears twice in one object of a valid JSON text, with the path of
 * that object. Iterative, so a deeply nested body cannot exhaust the stack.
 */
export function findDuplicateKey(text: string): { key: string; path: string } | undefined {
  type Frame = { keys?: Set<string>; expectKey: boolean; name: string };
  const stack: Frame[] = [];
  let pendingKey = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') {
      stack.push({ keys: c === '{' ? new Set() : undefined, expectKey: c === '{', name: pendingKey });
      pendingKey = '';
    } else if (c === '}' || c === ']') {
      stack.pop();
      pendingKey = '';
    } else if (c === ',') {
      pendingKey = '';
      const top = stack.at(-1);
      if (top?.keys) top.expectKey = true;
    } else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const top = stack.at(-1);
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys.has(key)) {
          const path = stack.map((f) => f.name).filter(Boolean).join('.');
          return { key, path };
        }
        top.keys.add(key);
        top.expectKey = false;
        pendingKey = key;
      }
      i = j;
    }
  }
  return undefined;
}

// ---- requests Node's HTTP parser refuses ----------------------------------------------

/**
 * `clientError` listener: Node answers a malformed request (a NUL or a bare CR in a header,
 * headers over 16 KiB, headers or body too slow) with a bare status line; this answers
 * with the API's JSON error instead, unless a response has already started on the socket.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request headers are larger than the server accepts (16 KiB)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request timed out: the request did not arrive in time']
        : [400, 'Bad Request', `malformed HTTP request (${err.code ?? 'parse error'}): check the request line and headers for control characters`];
  const body = JSON.stringify({ success: false, message });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Node's own limits, for what happens before Express sees a request. `requestTimeout`
 * covers receiving a request (headers and body) and stops once it is received, so event
 * streams, whose requests are short, are not cut; it backs up `requestTimeout()` above.
 */
export function applyServerLimits(server: http.Server, opts: { requestTimeoutMs: number }): void {
  const ms = opts.requestTimeoutMs;
  server.headersTimeout = ms > 0 ? Math.min(30_000, ms) : 30_000;
  server.requestTimeout = ms > 0 ? ms + 5_000 : 0;
  server.on('clientError', answerClientError);
}
