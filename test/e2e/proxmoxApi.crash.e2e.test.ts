import { Connection } from '@temporalio/client';
import type { ResultPromise } from 'execa';
import { ApiNode } from '../../lib/proxmox/api/node';
import { PveApi } from '../../lib/proxmox/api/http';
import { startChildWorker } from '../support/childWorker';
import { startHarness, type Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { waitFor } from '../../sandbox/testkit';

/**
 * API mode, the worker killed (SIGKILL) while the node downloads the image: the task goes
 * on on its node, and the next worker's retry follows the task whose UPID the killed one
 * recorded in its heartbeat, instead of downloading a second time. Slow by nature: Temporal
 * notices the dead worker only at the transfer activities' 60 s heartbeat timeout.
 */

let h: Harness;
let root: ApiNode;
let connection: Connection;
const workers: Array<ResultPromise> = [];

beforeAll(async () => {
  h = await startHarness({}, { proxmoxApi: true, worker: false });
  const s = h.config.proxmoxApi!;
  root = new ApiNode(new PveApi({ urls: s.urls, token: s.token, fingerprint: s.fingerprint }), h.config.mainNode);
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
});

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  root?.api.close();
  await connection?.close();
  await h?.stop();
});

async function startWorker(): Promise<{ child: ResultPromise }> {
  const started = await startChildWorker(h.config);
  workers.push(started.child);
  return started;
}

/** Whether downloadImage of `workflowId` has sent Temporal a heartbeat with details: the UPID it recorded. */
async function upidRecorded(workflowId: string | undefined): Promise<boolean> {
  if (!workflowId) return false;
  // The raw service call: the memo is encrypted, and this needs nothing decoded.
  const raw = await connection.workflowService.describeWorkflowExecution({ namespace: h.config.temporal.namespace, execution: { workflowId } });
  return (raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'downloadImage' && (a.heartbeatDetails?.payloads?.length ?? 0) > 0);
}

test('the next worker follows the running download task to its end; no second download, one task', async () => {
  const imagePath = h.images.image('ubuntu', '24.04').path;
  // 8 body chunks, 2 s apart: the node is still downloading when the worker dies.
  h.images.setChunkDelay(2000, imagePath);
  const { child: first } = await startWorker();
  let workflowId: string | undefined;
  const install = requestSse(`${h.api}/vm/install`, {
    body: { os: 'ubuntu', version: '24.04', name: 'crash' },
    timeoutMs: 240_000,
    onEvent: (e) => (workflowId ??= /^\[\*\] workflow id: (\S+)$/.exec(e.message)?.[1]),
  });
  await waitFor('the node to download the image', () => h.images.gets(imagePath) > 0, 60_000);
  // Killed once the heartbeat that records the task's UPID has reached Temporal.
  await waitFor('the heartbeat with the UPID', () => upidRecorded(workflowId), 60_000);
  first.kill('SIGKILL');
  await first;
  const activeWhenKilled = await root.api.get<Array<{ type: string }>>(`/nodes/${h.config.mainNode}/tasks`, { source: 'active' });
  expect(activeWhenKilled.filter((t) => t.type === 'download')).toHaveLength(1);

  await startWorker();
  const res = await install;
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(res.events.filter((e) => e.step === 'OS preparation > download').map((e) => e.message)).toContainEqual(
    expect.stringMatching(/^\[\*\] following the download task the previous attempt started \(UPID:pve1:[^)]*:download:/),
  );
  expect(res.events.at(-4)!.message).toMatch(/^\[\+\] VM installation completed/);
  expect(h.images.gets(imagePath)).toBe(1);
  const downloads = (await root.api.get<Array<{ type: string; status?: string }>>(`/nodes/${h.config.mainNode}/tasks`, { source: 'all', typefilter: 'download' })).filter(
    (t) => t.type === 'download',
  );
  expect(downloads).toHaveLength(1);
  expect(downloads[0].status).toBe('OK');
}, 240_000);
