import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { sseLimiter } from '../../api/limits';

/**
 * SSE_MAX_PER_CLIENT holds per address and per token: one token used from several
 * addresses (five hosts of one CI, or one caller behind many source addresses) cannot take
 * every slot of SSE_MAX_TOTAL.
 */

const request = (ip: string, token?: string) => ({ ip, headers: token ? { token } : {} }) as unknown as Request;
const response = () => new EventEmitter() as unknown as Response;

function admit(limiter: ReturnType<typeof sseLimiter>, req: Request): { status?: number; message?: string; res: Response } {
  const res = response();
  let seen: { status?: number; message?: string } = {};
  const next = (err?: { status?: number; message?: string }) => {
    seen = err ? { status: err.status, message: err.message } : {};
  };
  limiter.admit(req, res, next as unknown as NextFunction);
  return { ...seen, res };
}

const tokenOf = (req: Request) => (req.headers as Record<string, string | undefined>).token;

test('one token from five addresses holds at most SSE_MAX_PER_CLIENT streams', () => {
  const limiter = sseLimiter({ maxPerClient: 3, maxTotal: 100, tokenOf });
  const answers = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6'].map((ip) => admit(limiter, request(ip, 'ci')));
  expect(answers.map((a) => a.status ?? 200)).toEqual([200, 200, 200, 429, 429]);
  expect(answers[3].message).toBe('too many open event streams: token ci already has 3 (SSE_MAX_PER_CLIENT); close one and retry');
  expect(limiter.openTotal()).toBe(3);
  // Closing one of the token's streams frees a slot for it, from any address.
  answers[0].res.emit('close');
  expect(admit(limiter, request('127.0.0.7', 'ci')).status).toBeUndefined();
});

test('other tokens, and callers without one, count per address as before', () => {
  const limiter = sseLimiter({ maxPerClient: 2, maxTotal: 100, tokenOf });
  expect(admit(limiter, request('127.0.0.2', 'ci')).status).toBeUndefined();
  expect(admit(limiter, request('127.0.0.2', 'ops')).status).toBeUndefined();
  // The address is full (two streams), whichever token the third one carries.
  expect(admit(limiter, request('127.0.0.2', 'alice')).status).toBe(429);
  expect(admit(limiter, request('127.0.0.3')).status).toBeUndefined();
  expect(admit(limiter, request('127.0.0.4', 'ops')).status).toBeUndefined();
  expect(admit(limiter, request('127.0.0.5', 'ops')).status).toBe(429);
});
