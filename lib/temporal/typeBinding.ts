import type { ClientInterceptors } from '@temporalio/client';
import { withWorkflowType } from '../../contract';

/**
 * Every workflow this client starts gets its type in its input (contract/workflows.ts,
 * WORKFLOW_TYPE_FIELD), which the workers require. Schedules are not covered here: the SDK
 * intercepts a schedule's creation but not its update, so the schedule code binds its
 * action's input itself (`withWorkflowType`).
 */
export function workflowTypeBinding(): ClientInterceptors {
  return {
    workflow: [
      {
        startWithDetails: (input, next) => next({ ...input, options: { ...input.options, args: withWorkflowType(input.workflowType, input.options.args) } }),
        signalWithStart: (input, next) => next({ ...input, options: { ...input.options, args: withWorkflowType(input.workflowType, input.options.args) } }),
        startUpdateWithStart: (input, next) =>
          next({ ...input, workflowStartOptions: { ...input.workflowStartOptions, args: withWorkflowType(input.workflowType, input.workflowStartOptions.args) } }),
      },
    ],
  };
}
