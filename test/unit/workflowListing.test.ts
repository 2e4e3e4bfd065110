import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { decodeListedMemo, listWorkflows, type ListedWorkflow } from '../../lib/temporal/workflowListing';
import { startVmOperation } from '../../api/vm/operation';
import type { Logger } from '../../lib/observability/log';
import type { EncryptionCodec } from '../../lib/temporal/codec';
import { codecWith, randomKey, toPayload } from '../fixtures/codec/keys';

/**
 * Running workflows listed raw, and their memos decoded one workflow at a time: a memo this
 * deployment cannot decode is that workflow's problem, not the listing's. The client is a
 * stand-in with the real codec and converter: no Temporal server.
 */

const NAMESPACE = 'qemurun-unit';
const ours = codecWith([['ours', randomKey()]]);
const theirs = codecWith([['theirs', randomKey()]]);

type ListRequest = temporal.api.workflowservice.v1.IListWorkflowExecutionsRequest;
type ListPage = { executions: ListedWorkflow[]; nextPageToken?: Uint8Array };

/** A client whose codec is `ours` and whose visibility answers `pages` in turn. */
function stubClient(pages: ListPage[] = [], workflow: Partial<Client['workflow']> = {}) {
  const requests: ListRequest[] = [];
  const client = {
    options: { namespace: NAMESPACE, loadedDataConverter: { payloadConverter: defaultPayloadConverter, payloadCodecs: [ours] } },
    workflowService: {
      listWorkflowExecutions: async (req: ListRequest) => {
        requests.push(req);
        return pages[requests.length - 1] ?? { executions: [] };
      },
    },
    workflow,
  } as unknown as Client;
  return { client, requests };
}

/** A memo field as a client with `codec` writes it for workflow `workflowId`. */
async function sealed(codec: EncryptionCodec, workflowId: string, value: unknown): Promise<Payload> {
  const [payload] = await codec.encode([toPayload(value)], { type: 'workflow', namespace: NAMESPACE, workflowId });
  return payload;
}

function listed(workflowId: string, type: string, memo?: Record<string, Payload>): ListedWorkflow {
  return { execution: { workflowId, runId: `${workflowId}-run` }, type: { name: type }, ...(memo ? { memo: { fields: memo } } : {}) };
}

function recordingLogger() {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const logger = { warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ fields, message }) } as unknown as Logger;
  return { logger, warnings };
}

describe('decodeListedMemo', () => {
  test('a memo sealed with our key decodes to its fields', async () => {
    const { client } = stubClient();
    const wf = listed('install-1', 'installVm', { request: await sealed(ours, 'install-1', { name: 'web' }), source: await sealed(ours, 'install-1', 'api') });
    expect(await decodeListedMemo(client, wf)).toEqual({ memo: { request: { name: 'web' }, source: 'api' } });
  });

  test('no memo is no error', async () => {
    const { client } = stubClient();
    expect(await decodeListedMemo(client, listed('by-hand', 'installVm'))).toEqual({});
    expect(await decodeListedMemo(client, listed('by-hand', 'installVm', {}))).toEqual({});
  });

  test('a memo sealed with a key we lack is an error naming that key id', async () => {
    const { client } = stubClient();
    const decoded = await decodeListedMemo(client, listed('install-2', 'installVm', { request: await sealed(theirs, 'install-2', { name: 'db' }) }));
    expect('error' in decoded && decoded.error.message).toMatch(/unknown key id "theirs" \(known: ours\).*ENCRYPTION_KEYS/);
  });

  test('a memo written without the codec, or sealed for another workflow, is an error too', async () => {
    const { client } = stubClient();
    const plain = await decodeListedMemo(client, listed('install-3', 'installVm', { request: toPayload({ name: 'x' }) }));
    expect('error' in plain && plain.error.message).toMatch(/refusing a payload that is not encrypted/);
    // Decoded in the listed workflow's context, as the SDK decodes it: a memo copied from
    // another workflow does not pass for this one's.
    const copied = await decodeListedMemo(client, listed('install-4', 'installVm', { request: await sealed(ours, 'install-1', { name: 'web' }) }));
    expect('error' in copied && copied.error.message).toMatch(/payload of workflow "install-1" given to workflow "install-4"/);
  });
});

test('listWorkflows asks the client\'s namespace, page by page, and decodes nothing', async () => {
  const foreign = listed('install-b', 'installVm', { request: await sealed(theirs, 'install-b', {}) });
  const { client, requests } = stubClient([
    { executions: [listed('install-a', 'installVm')], nextPageToken: Buffer.from('p2') },
    { executions: [foreign], nextPageToken: new Uint8Array() },
  ]);
  const seen: ListedWorkflow[] = [];
  for await (const wf of listWorkflows(client, 'VmId = 120', 20)) seen.push(wf);
  expect(seen.map((wf) => wf.execution?.workflowId)).toEqual(['install-a', 'install-b']);
  expect(seen[1]).toBe(foreign);
  expect(requests).toEqual([
    { namespace: NAMESPACE, query: 'VmId = 120', pageSize: 20, nextPageToken: undefined },
    { namespace: NAMESPACE, query: 'VmId = 120', pageSize: 20, nextPageToken: Buffer.from('p2') },
  ]);
});

test('an operation starts although a workflow on its VM has a memo we cannot decode, and the log names it', async () => {
  const foreign = listed('install-elsewhere', 'installVm', { request: await sealed(theirs, 'install-elsewhere', { name: 'db' }) });
  const started: string[] = [];
  const { client, requests } = stubClient([{ executions: [foreign] }], {
    // Never asked about the foreign workflow: describing it would decode its memo again.
    getHandle: (id: string) => {
      throw new Error(`getHandle(${id}) called`);
    },
    start: (async (_type: string, opts: { workflowId: string }) => {
      started.push(opts.workflowId);
      return { workflowId: opts.workflowId };
    }) as unknown as Client['workflow']['start'],
  });
  const { logger, warnings } = recordingLogger();

  const handle = await startVmOperation({
    client,
    logger,
    taskQueue: 'q',
    workflow: 'vmStop',
    args: [{ vmid: 120 }],
    vmid: 120,
    node: 'pve1',
    operation: 'stop',
    summary: 'stop VM 120 on pve1',
    instance: undefined,
  });

  expect(handle.workflowId).toBe('vm-120');
  expect(started).toEqual(['vm-120']);
  expect(requests.map((r) => r.query)).toEqual([`VmId = 120 AND ExecutionStatus = 'Running' AND WorkflowId != 'vm-120'`]);
  expect(warnings).toHaveLength(1);
  expect(warnings[0].fields).toMatchObject({ workflowId: 'install-elsewhere', workflowType: 'installVm', vmid: 120 });
  expect(warnings[0].fields.reason).toMatch(/unknown key id "theirs"/);
  expect(warnings[0].message).toMatch(/^workflow install-elsewhere \(installVm\) carries VmId 120 but its memo cannot be decoded here \(payload was encrypted with unknown key id "theirs".*\): not counted as holding the VM$/);
});
