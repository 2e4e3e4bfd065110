import { MockActivityEnvironment } from '@temporalio/testing';
import { beat, recordedTask } from '../../activities/tasks';

/**
 * The UPID in an activity's heartbeat details is what keeps a retry from starting a
 * Proxmox operation twice: every heartbeat carries it, a retry's included.
 */
const earlier = 'UPID:pve1:0000ABCD:0001E240:6751A2B3:imgcopy:120:root@pam:';
const later = 'UPID:pve1:0000BCDE:0001E241:6751A2C0:imgcopy:120:root@pam:';

function beats(env: MockActivityEnvironment): unknown[] {
  const seen: unknown[] = [];
  env.on('heartbeat', (details: unknown) => seen.push(details));
  return seen;
}

test("a retry's heartbeats keep the earlier attempt's task until this attempt records its own", async () => {
  // The retry is still reading the earlier task's status (a slow node) when keepAlive
  // beats: that beat must not leave a third attempt without the task, to start it again.
  const env = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { upid: earlier } });
  const seen = beats(env);
  await env.run(async () => {
    const task = recordedTask();
    expect(task.resumeTask).toBe(earlier);
    beat();
    task.onTask(later);
    beat();
  });
  expect(seen).toEqual([{ upid: earlier }, { upid: later }, { upid: later }]);
});

test('an attempt with no task recorded before beats without details', async () => {
  const env = new MockActivityEnvironment({ heartbeatDetails: { attempt: 3 } });
  const seen = beats(env);
  await env.run(async () => {
    expect(recordedTask().resumeTask).toBeUndefined();
    beat();
  });
  expect(seen).toEqual([undefined]);
});
