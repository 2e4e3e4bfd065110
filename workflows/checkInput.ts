import { workflowInfo } from '@temporalio/workflow';
import { checkedInput, type InputSchema } from '../contract';

/** A workflow's own input, checked as contract/inputs.ts's checkedInput checks every input, under the workflow's type. */
export function checkedWorkflowInput<T>(schema: InputSchema<T>, input: unknown): T {
  return checkedInput(schema, input, workflowInfo().workflowType);
}
