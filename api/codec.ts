import express, { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { errorMiddleware, HttpError, InvalidRequestError } from './errors';
import type { Logger } from '../lib/observability/log';
import { verifyJsonBody } from './limits';
import { displayCodec } from '../lib/temporal/displayCodec';
import { z } from 'zod';
import { err } from './openapi/answer';
import { defineRoutes } from './route';
import { routerFor } from './mountRoutes';

/**
 * The codec server: lets the Temporal Web UI and `temporal --codec-endpoint <base>/codec`
 * show encrypted history in clear text. Both call `<endpoint>/decode` (and `/encode`, refused here)
 * with Payloads in proto-JSON form: `{ payloads: [{ metadata: { k: base64 }, data: base64 }] }`.
 *
 * The Web UI calls it from the user's browser, not from the UI server, so it needs CORS
 * for the UI's origin. The answer is plaintext history, so POSTs sit behind `authorize`,
 * and it serves people: secrets come back as "<redacted>" and nothing is encoded
 * (lib/temporal/displayCodec.ts). Workers decode in full with the codec, in process.
 */

export interface CodecRouterOptions {
  /** The same guard as mutating endpoints; decode hands out plaintext. */
  authorize: RequestHandler;
  /** Origins of the Temporal UI, e.g. http://127.0.0.1:8233 and http://localhost:8233. */
  allowedOrigins: readonly string[];
  /** Largest request body, in bytes (default CODEC_BODY_LIMIT). */
  bodyLimit?: number;
  /** Where unexpected failures are logged; default stderr. */
  logger?: Logger;
}

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

/** "http://LOCALHOST:8233/" and "http://localhost:8233" are the same origin. */
function normaliseOrigin(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.origin === 'null' ? undefined : url.origin;
  } catch {
    return undefined;
  }
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

function bytes(value: unknown, where: string): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value)) throw new InvalidRequestError(`${where} must be a base64 string`);
  return Buffer.from(value, 'base64');
}

function fromJson(body: unknown): Payload[] {
  const list = (body as { payloads?: unknown } | undefined)?.payloads;
  if (!Array.isArray(list)) throw new InvalidRequestError('body must be {"payloads": [{"metadata": {...}, "data": "<base64>"}]}');
  return list.map((p: unknown, i) => {
    if (typeof p !== 'object' || p === null || Array.isArray(p)) throw new InvalidRequestError(`payloads[${i}] must be an object`);
    const { metadata = {}, data = '' } = p as { metadata?: unknown; data?: unknown };
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
      throw new InvalidRequestError(`payloads[${i}].metadata must be an object`);
    }
    const meta: Record<string, Uint8Array> = {};
    for (const [k, v] of Object.entries(metadata)) meta[k] = bytes(v, `payloads[${i}].metadata.${k}`);
    // proto-JSON leaves out empty fields, so a missing `data` means empty bytes.
    return { metadata: meta, data: bytes(data, `payloads[${i}].data`) };
  });
}

function toJson(payloads: Payload[]): { payloads: JsonPayload[] } {
  const b64 = (u: Uint8Array | null | undefined) => Buffer.from(u ?? []).toString('base64');
  return {
    payloads: payloads.map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, b64(v)])),
      data: b64(p.data),
    })),
  };
}

function corsFor(allowedOrigins: readonly string[]): RequestHandler {
  const allowed = new Set(allowedOrigins.map(normaliseOrigin).filter((o): o is string => o !== undefined));
  return (req, res, next) => {
    const origin = req.get('Origin');
    const ok = origin !== undefined && allowed.has(normaliseOrigin(origin) ?? '');
    res.vary('Origin');
    if (ok) {
      res.set({
        'Access-Control-Allow-Origin': origin,
        // The UI can send the user's token ("include credentials"); then '*' is not accepted.
        'Access-Control-Allow-Credentials': 'true',
        'Access-Control-Allow-Methods': 'POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, X-Namespace, Authorization',
        'Access-Control-Max-Age': '600',
      });
    }
    if (req.method === 'OPTIONS') {
      res.status(ok ? 204 : 403).end();
      return;
    }
    // A browser page from elsewhere gets no answer it could use; the CLI sends no Origin.
    if (origin !== undefined && !ok) {
      next(new HttpError(403, `origin ${origin} may not use the codec endpoint`));
      return;
    }
    next();
  };
}

function handler(codec: PayloadCodec, op: 'encode' | 'decode'): RequestHandler {
  return async (req: Request, res: Response) => {
    if (!req.is('application/json')) throw new InvalidRequestError('Content-Type must be application/json', 415);
    const payloads = fromJson(req.body);
    let out: Payload[];
    try {
      out = await codec[op](payloads);
    } catch (err) {
      // Unknown key id, altered ciphertext: the caller can act on the message (it never holds key material).
      throw new HttpError(422, `${op} failed: ${(err as Error).message}`);
    }
    // Decoded history is plaintext: keep it out of browser and proxy caches.
    res.set('Cache-Control', 'no-store').json(toJson(out));
  };
}

/** The largest body /codec/decode takes: 256 KiB, twice the largest payload the service writes in base64. */
export const CODEC_BODY_LIMIT = 256 * 1024;

const codecPayloads = z.object({ payloads: z.array(z.object({ metadata: z.record(z.string(), z.string()).optional(), data: z.string().optional() })) });

export interface CodecRouteDeps {
  /** Without it there is no /codec. */
  codec?: PayloadCodec;
  /** `codecUiOrigins`: the Temporal UI's origins, e.g. http://127.0.0.1:8233 and http://localhost:8233. */
  config: { readonly codecUiOrigins: readonly string[] };
  /** Largest request body, in bytes (default CODEC_BODY_LIMIT). */
  codecBodyLimit?: number;
  /** Where unexpected failures are logged; default stderr. */
  errorLogger?: Logger;
}

/**
 * `/codec/decode` and `/codec/encode`. Mounted before the API's CORS and body limit: the
 * Temporal UI (another origin, e.g. localhost:8233) posts whole history pages here. Their
 * `role`: the guard of the server that mounts them (the app's: requireRole, `read`).
 */
export const codecRoutes = defineRoutes({
  stage: 'early',
  at: '/',
  when: (deps: CodecRouteDeps) => deps.codec !== undefined,
  setup: (deps: CodecRouteDeps) => ({
    ...deps,
    // Its own parser and limit, mounted before the app-wide JSON parser: the UI asks for one
    // event's payloads at a time, and the largest the service writes (an install input with
    // 64 KiB of userData) is over the API's 64 KiB once encrypted and in base64.
    json: express.json({ limit: deps.codecBodyLimit ?? CODEC_BODY_LIMIT, verify: verifyJsonBody }),
    decode: handler(displayCodec(deps.codec!), 'decode'),
  }),
  around: {
    before: (router, s) => router.use('/codec', corsFor(s.config.codecUiOrigins)),
    // Mounted apart from the API (and before its parser), so it answers its own errors the API's way.
    after: (router, s) => router.use('/codec', errorMiddleware(s.errorLogger)),
  },
  routes: [
    {
      method: 'POST',
      path: '/codec/decode',
      summary: "Decode history payloads for the Temporal UI (secrets redacted): Temporal's remote codec protocol",
      // History for display (secrets redacted): a read, but only from ALLOW_IPS, as before.
      role: 'read',
      body: codecPayloads,
      answers: { 200: { description: 'the decoded payloads', json: codecPayloads }, 400: err('not a list of payloads') },
      use: ({ json }) => [json],
      handle: ({ decode }, req, res, next) => decode(req, res, next),
    },
    {
      method: 'POST',
      path: '/codec/encode',
      summary: 'Refused: the codec endpoint only decodes',
      role: 'read',
      answers: { 403: err('always') },
      handle: () => {
        throw new HttpError(403, 'the codec endpoint only decodes, for display; start or change work through the API');
      },
    },
  ],
});

/** The codec routes alone, for a server of their own (`authorize` is their guard). */
export function codecRouter(codec: PayloadCodec, opts: CodecRouterOptions): express.Router {
  return routerFor(
    codecRoutes,
    { codec, config: { codecUiOrigins: opts.allowedOrigins }, codecBodyLimit: opts.bodyLimit, errorLogger: opts.logger },
    { guard: () => opts.authorize },
  );
}
