import { z } from 'zod';

/**
 * Evaluated once, when the worker's workflow context starts and before any run exists
 * (worker/bundleOptions.ts): the packages imported here are shared by every run instead
 * of being evaluated again for each, and frozen after this module has run. Only code
 * that keeps no state of a run belongs here.
 *
 * zod sets its global defaults (error messages, memoizer) on its first schema and parse;
 * frozen before that, every later schema would throw. So the first use is here.
 */
z.object({ name: z.string().min(1), size: z.number().int().optional() }).safeParse({ name: '' });

export { z };
