import { workflowInfo } from '@temporalio/workflow';
import { checkInput, failure, type InputSchema, InvalidInputError } from '../contract';

/**
 * A workflow's own input, checked with the API's rules before any step runs. Input that
 * breaks them did not come through the API: the workflow fails at once, retrying nothing.
 */
export function checkedInput<T>(schema: InputSchema<T>, input: unknown): T {
  try {
    return checkInput(schema, input, workflowInfo().workflowType);
  } catch (err) {
    if (err instanceof InvalidInputError) throw failure('InvalidRequestError', err.message);
    throw err;
  }
}
