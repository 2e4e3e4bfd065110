import type http from 'node:http';
import express from 'express';
import { errorMiddleware } from '../../api/errors';
import type { Streams } from '../../api/sse';
import { workflowRoutes } from '../../api/workflows';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/observability/log';
import { clientOver, describing, ours, type Run, sealed, Status as S, TASK_QUEUE, theirs } from '../fixtures/temporal/fakeService';

/**
 * GET /workflows/:id of a workflow whose memo this deployment cannot decode (sealed with
 * another deployment's keys, or a key since dropped) answers as for any workflow that is not
 * the service's own, and the log names it. The client is the SDK's, over a stand-in of the
 * server: no Temporal.
 */

const config = { temporal: { taskQueue: TASK_QUEUE }, allowIps: ['0.0.0.0'], apiTokens: [] } as unknown as Config;
const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
const logger = {
  warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ fields, message }),
  error: () => undefined,
} as unknown as Logger;

let server: http.Server;
let base: string;

beforeAll(async () => {
  const runs: Run[] = [
    {
      workflowId: 'install-theirs',
      runId: 'run-t',
      type: 'installVm',
      status: S.WORKFLOW_EXECUTION_STATUS_RUNNING,
      memo: { request: await sealed(theirs, 'install-theirs', { name: 'db' }) },
    },
    {
      workflowId: 'install-ours',
      runId: 'run-o',
      type: 'installVm',
      status: S.WORKFLOW_EXECUTION_STATUS_FAILED,
      memo: { request: await sealed(ours, 'install-ours', { name: 'web' }) },
      closeSec: 1_700_000_100,
    },
  ];
  const client = clientOver({
    ...describing(runs),
    queryWorkflow: async () => {
      throw new Error('no worker answers queries here');
    },
  });
  const streams = { readers: { known: () => false }, limiter: {} } as unknown as Streams;
  const app = express();
  app.use('/workflows/:workflowId', workflowRoutes(client, config, streams, logger));
  app.use(errorMiddleware(logger));
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));
beforeEach(() => {
  warnings.length = 0;
});

test('a workflow whose memo cannot be decoded here is not one of ours: 404, and the log names it', async () => {
  const res = await fetch(`${base}/workflows/install-theirs`);
  expect(res.status).toBe(404);
  expect(await res.json()).toEqual({ success: false, message: 'no workflow install-theirs' });
  expect(warnings).toHaveLength(1);
  expect(warnings[0].fields).toMatchObject({ workflowId: 'install-theirs' });
  expect(warnings[0].fields.reason).toMatch(/unknown key id "theirs"/);
  expect(warnings[0].message).toMatch(/^workflow install-theirs: its memo cannot be decoded here \(payload was encrypted with unknown key id "theirs".*\): answered as not found$/);
});

test('one of ours is described as before, and one that does not exist is a 404 with nothing logged', async () => {
  const res = await fetch(`${base}/workflows/install-ours`);
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ success: true, workflowId: 'install-ours', runId: 'run-o', type: 'installVm', status: 'FAILED' });
  expect((await fetch(`${base}/workflows/install-none`)).status).toBe(404);
  expect(warnings).toEqual([]);
});
