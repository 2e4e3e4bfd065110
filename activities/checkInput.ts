import type { z } from 'zod';
import { checkInput, failure, InvalidInputError } from '../contract';

/**
 * An activity's own input, checked with the API's rules before it reaches a command:
 * a value that breaks them fails the activity for good (a retry would not fix it).
 */
export function checkedInput<T>(schema: z.ZodType<T>, input: unknown, activity: string): T {
  try {
    return checkInput(schema, input, activity);
  } catch (err) {
    if (err instanceof InvalidInputError) throw failure('InvalidRequestError', err.message);
    throw err;
  }
}
