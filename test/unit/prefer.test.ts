import type { Request } from 'express';
import { prefersAsync } from '../../api/prefer';

/** `Prefer` as RFC 7240 writes it: a list, case-insensitive names, optional parameters. */
const req = (prefer?: string) => ({ get: (name: string) => (name.toLowerCase() === 'prefer' ? prefer : undefined) }) as unknown as Request;

test.each([
  ['respond-async', true],
  ['Respond-Async', true],
  [' respond-async ', true],
  ['wait=10, respond-async', true],
  ['respond-async; foo=bar', true],
  ['respond-async=1', true],
  ['return=minimal', false],
  ['respond-asynchronously', false],
  ['', false],
  [undefined, false],
])('Prefer: %p → async %p', (header, expected) => {
  expect(prefersAsync(req(header))).toBe(expected);
});
