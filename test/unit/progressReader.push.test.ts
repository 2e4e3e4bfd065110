import type { WorkflowClient } from '@temporalio/client';
import { ProgressReaders } from '../../api/progressReader';
import { ProgressPushes } from '../../lib/progressPushes';
import type { ProgressEvent, ProgressPage, RunState } from '../../contract';

/**
 * The reader's side of pushes, with Temporal stubbed at the client: a workflow whose
 * progress (the query's answer) the test writes, and pushes the test sends as the worker's
 * sink would. Polling is set to a minute, so whatever arrives sooner came by push or by a
 * read a push asked for. The clock is jest's: time passes only when a test moves it, so
 * "no read for a while" is a statement about the reader's timers, not about this machine's
 * speed.
 */

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

const MINUTE = 60_000;
const ID = 'install-push';

function fakeWorkflow() {
  const events: ProgressEvent[] = [];
  let state: RunState = 'running';
  let queries = 0;
  let describes = 0;
  let answer: () => Promise<void> = () => Promise.resolve();
  const handle = {
    describe: async () => {
      describes++;
      return { runId: 'run-1', status: { name: 'RUNNING' } };
    },
    query: async (_q: unknown, after: number): Promise<ProgressPage> => {
      queries++;
      await answer();
      return { events: events.filter((e) => e.seq > after), state, lastSeq: events.length };
    },
  };
  const client = { getHandle: () => handle } as unknown as WorkflowClient;
  return {
    client,
    record(message: string): ProgressEvent {
      const e = { seq: events.length + 1, step: 'step', status: 'processing' as const, message, at: Date.now() };
      events.push(e);
      return e;
    },
    end(s: RunState) {
      state = s;
    },
    get queries() {
      return queries;
    },
    get describes() {
      return describes;
    },
    /** Holds every query's answer until the returned function is called. */
    holdAnswers(): () => void {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      answer = () => held;
      return () => {
        answer = () => Promise.resolve();
        release();
      };
    },
  };
}

/** Lets the reader work, moving the clock a step at a time, until `what` holds (the test's timeout bounds it). */
async function until(what: () => boolean): Promise<void> {
  while (!what()) await jest.advanceTimersByTimeAsync(5);
}

function setUp(runId?: string) {
  const wf = fakeWorkflow();
  const pushes = new ProgressPushes();
  const readers = new ProgressReaders(wf.client, { fastMs: MINUTE, slowMs: MINUTE, stalledMs: MINUTE, pushedSlowMs: MINUTE }, pushes);
  const reader = readers.reader(ID, runId);
  let wakes = 0;
  const leave = reader.watch(() => wakes++);
  const push = (event: ProgressEvent, runId = 'run-1') => pushes.publish({ workflowId: ID, runId, event });
  const seqs = () => reader.eventsAfter(0).map((e) => e.seq);
  return { wf, pushes, reader, leave, push, seqs, wakes: () => wakes };
}

test('a pushed event that is the next one reaches the watchers without a read', async () => {
  const { wf, reader, leave, push, seqs, wakes } = setUp();
  const first = wf.record('[*] before the first read');
  await until(() => reader.lastSeq === 1);
  expect(wf.queries).toBe(1);
  push(first); // recorded before the first read, pushed after: already there

  for (let i = 0; i < 5; i++) push(wf.record(`[*] line ${i}`));
  expect(seqs()).toEqual([1, 2, 3, 4, 5, 6]);
  expect(reader.pushedEvents).toBe(5);
  expect(wakes()).toBeGreaterThanOrEqual(5);
  expect(wf.queries).toBe(1);
  leave();
});

test('a gap is read at once, and duplicates or another run of the id change nothing', async () => {
  const { wf, reader, leave, push, seqs } = setUp();
  await until(() => wf.queries === 1);
  push(wf.record('one'));
  wf.record('two, whose push is lost');
  wf.record('three, whose push is lost');
  push(wf.record('four'));
  // Four is not the next event: it is not taken; the reader reads instead of waiting a minute.
  await until(() => reader.lastSeq === 4);
  expect(wf.queries).toBe(2);
  expect(reader.eventsAfter(0).map((e) => e.message)).toEqual(['one', 'two, whose push is lost', 'three, whose push is lost', 'four']);

  const five = wf.record('five');
  push(five);
  push(five);
  push(reader.eventsAfter(0)[1]);
  push({ seq: 6, step: 'step', status: 'processing', message: 'from the next run of this id', at: 0 }, 'run-2');
  expect(seqs()).toEqual([1, 2, 3, 4, 5]);
  leave();
});

test('a gap pushed while a read is out is read right after it', async () => {
  const { wf, reader, leave, push, seqs } = setUp();
  await until(() => wf.queries === 1);
  const release = wf.holdAnswers();
  wf.record('one');
  push(wf.record('two')); // a gap: one is not read yet
  await until(() => wf.queries === 2);
  const three = wf.record('three');
  push(three); // a gap again, while the second read is out
  release();
  await until(() => reader.lastSeq === 3);
  expect(seqs()).toEqual([1, 2, 3]);
  leave();
});

test('a pushed end closes the reader once every event is in, and not before', async () => {
  const { wf, pushes, reader, leave, push } = setUp();
  await until(() => wf.queries === 1);
  push(wf.record('one'));
  wf.record('two, whose push is lost');
  wf.end('completed');
  pushes.publish({ workflowId: ID, runId: 'run-1', ended: { state: 'completed', lastSeq: 2 } });
  // The end says there are two events; one is in, so the reader reads the rest first.
  await until(() => reader.end !== undefined);
  expect(reader.lastSeq).toBe(2);
  expect(reader.state).toBe('completed');
  expect(wf.queries).toBe(2);
  leave();
});

test('the end of a run whose every event was pushed needs no read', async () => {
  const { wf, pushes, reader, leave, push } = setUp();
  await until(() => wf.queries === 1);
  push(wf.record('one'));
  wf.end('failed');
  pushes.publish({ workflowId: ID, runId: 'run-1', ended: { state: 'failed', lastSeq: 1 } });
  expect(reader.end).toBe('closed');
  expect(reader.state).toBe('failed');
  leave();
  await until(() => pushes.size === 0);
  expect(wf.queries).toBe(1);
});

test('a reader told the run (its stream just started it) takes pushes at once, without a describe', async () => {
  const { wf, reader, leave, push, seqs } = setUp('run-1');
  const release = wf.holdAnswers();
  push(wf.record('one'));
  push(wf.record('two'));
  expect(seqs()).toEqual([1, 2]);
  release();
  await until(() => wf.queries === 1);
  expect(wf.describes).toBe(0);
  expect(reader.eventsAfter(0).map((e) => e.message)).toEqual(['one', 'two']);
  leave();
});

test('without pushes (an API process with no worker) the reader polls as before', async () => {
  const wf = fakeWorkflow();
  const readers = new ProgressReaders(wf.client, { fastMs: 10, slowMs: 20, stalledMs: 20, pushedSlowMs: MINUTE });
  const reader = readers.reader(ID);
  const leave = reader.watch(() => undefined);
  wf.record('one');
  wf.record('two');
  await until(() => reader.lastSeq === 2);
  wf.record('three');
  wf.end('completed');
  await until(() => reader.end === 'closed');
  expect(reader.eventsAfter(0).map((e) => e.message)).toEqual(['one', 'two', 'three']);
  expect(reader.pushedEvents).toBe(0);
  expect(wf.queries).toBeGreaterThan(1);
  leave();
});

test('reads stretch to the long pause only while pushes bring the events, and shrink when a read finds one they did not', async () => {
  const wf = fakeWorkflow();
  const pushes = new ProgressPushes();
  const readers = new ProgressReaders(wf.client, { fastMs: 10, slowMs: 20, stalledMs: 20, pushedSlowMs: MINUTE }, pushes);
  const reader = readers.reader(ID, 'run-1');
  const leave = reader.watch(() => undefined);
  const push = (event: ProgressEvent) => pushes.publish({ workflowId: ID, runId: 'run-1', event });

  // Subscribed, but nothing pushed yet (the worker may be in another process): polls.
  wf.record('recorded where no push comes from');
  await until(() => reader.lastSeq === 1);
  const polled = wf.queries;
  await jest.advanceTimersByTimeAsync(200); // pauses of 10 to 20 ms
  expect(wf.queries).toBeGreaterThan(polled + 3);

  // Pushes bring the events: the next read waits the long pause.
  push(wf.record('pushed'));
  await jest.advanceTimersByTimeAsync(100); // the read out when the push came ends
  const covered = wf.queries;
  await jest.advanceTimersByTimeAsync(MINUTE - 1000); // anything short of the long pause
  expect(wf.queries).toBe(covered);

  // An event no push brought (missed): found by the read a later push's gap asks for, and
  // from then on the reader polls again.
  wf.record('never pushed');
  push(wf.record('pushed after a gap'));
  await until(() => reader.lastSeq === 4);
  const after = wf.queries;
  await jest.advanceTimersByTimeAsync(200);
  expect(wf.queries).toBeGreaterThan(after + 3);
  leave();
});
