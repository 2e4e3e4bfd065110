import type { Payload } from '@temporalio/common';
import type { InstallInput } from '../../contract';
import { checkSameRequest } from '../../api/idempotency';
import { clientOver, ours, type Service, sealed, theirs } from '../fixtures/temporal/fakeService';

/**
 * An Idempotency-Key's install is read back from its start event. One this deployment
 * cannot decode (another deployment on the namespace derives the same workflow id from the
 * same key; a key since dropped) is a refusal naming it, not a 500. The client is the SDK's,
 * over a stand-in of the server: no Temporal.
 */

const input = { spec: { os: 'debian', version: '12', name: 'web' } } as InstallInput;

/** GetWorkflowExecutionHistory whose start event carries `payload` as the input. */
function historyWith(payload: Payload): Service {
  return {
    getWorkflowExecutionHistory: async () => ({
      history: { events: [{ eventId: 1, workflowExecutionStartedEventAttributes: { input: { payloads: [payload] } } }] },
    }),
  };
}

test('a key held by an install whose input cannot be decoded here is a 422 naming the workflow and the missing key', async () => {
  const client = clientOver(historyWith(await sealed(theirs, 'install-key-1', input)));
  await expect(checkSameRequest(client, 'k1', 'install-key-1', input)).rejects.toMatchObject({
    status: 422,
    extra: { workflowId: 'install-key-1' },
    message: expect.stringMatching(/^Idempotency-Key "k1" is held by workflow install-key-1, whose request cannot be decoded here \(payload was encrypted with unknown key id "theirs".*\); use a new key$/),
  });
});

test('the same request passes, and another is the 422 it was', async () => {
  const client = clientOver(historyWith(await sealed(ours, 'install-key-2', input)));
  await expect(checkSameRequest(client, 'k2', 'install-key-2', input)).resolves.toBeUndefined();
  const other = { ...input, spec: { ...input.spec, name: 'db' } } as InstallInput;
  await expect(checkSameRequest(client, 'k2', 'install-key-2', other)).rejects.toMatchObject({ status: 422, message: expect.stringMatching(/was already used for another install request/) });
});
