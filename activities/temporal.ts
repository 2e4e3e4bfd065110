import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { type ProgressEvent, progressQuery, relayedProgressSignal, type RunningOperation, vmWorkflowId } from '../contract';
import { describeUndecoded } from '../lib/temporal/workflowDescription';

export interface TemporalDeps {
  client: Client;
}

const RELAY_POLL_MS = 1000;

/** Activities that read Temporal itself: which operation holds a VM, and a child workflow's progress. */
export function temporalActivities({ client }: TemporalDeps) {
  return {
    /**
     * The operation running under `vm-<vmid>`, if any, so a skipped run can say what it waited
     * for. Described raw, memo undecoded: one started with a key this deployment lacks holds
     * the VM all the same, and decoding its memo would fail this activity (and the scheduled
     * run) instead of naming it.
     */
    async runningVmOperation(input: { vmid: number }): Promise<RunningOperation | undefined> {
      const d = await describeUndecoded(client, vmWorkflowId(input.vmid));
      if (d?.status !== 'RUNNING') return undefined;
      return { workflowId: d.workflowId, runId: d.runId, type: d.type, startTime: d.startTime?.toISOString() ?? 'at an unknown time' };
    },

    /**
     * Copies a child workflow's progress events into this activity's workflow as they
     * appear (one signal per poll that found any), so the parent's stream shows the child's
     * steps live. Resumes after the last relayed event when retried. Returns the number of
     * events relayed once the child has closed and every event is across.
     */
    async relayProgress(input: { workflowId: string; runId?: string }): Promise<number> {
      const ctx = Context.current();
      const parent = ctx.info.workflowExecution;
      if (!parent) throw new Error('relayProgress needs an activity started by a workflow');
      const target = client.workflow.getHandle(parent.workflowId, parent.runId);
      const child = client.workflow.getHandle(input.workflowId, input.runId);
      let cursor = (ctx.info.heartbeatDetails as number | undefined) ?? 0;
      let polls = 0;
      for (;;) {
        ctx.heartbeat(cursor);
        let closed = false;
        try {
          const page = await child.query(progressQuery, cursor);
          if (page.events.length > 0) {
            const events: Array<Omit<ProgressEvent, 'seq'>> = page.events.map(({ step, status, message }) => ({ step, status, message }));
            await target.signal(relayedProgressSignal, { events });
            cursor = page.events[page.events.length - 1].seq;
            ctx.heartbeat(cursor);
            if (cursor < page.lastSeq) continue; // more pages waiting
          }
          if (page.state !== 'running' && cursor >= page.lastSeq) return cursor;
          // A child terminated from outside never leaves 'running': its status says it closed.
          if (++polls % 5 === 0) closed = (await child.describe()).status.name !== 'RUNNING';
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return cursor;
          ctx.log.warn('could not relay progress', { error: String(err) });
        }
        if (closed) {
          // One last read for anything emitted before it closed.
          const last = await child.query(progressQuery, cursor).catch(() => undefined);
          if (last && last.events.length > 0) {
            await target.signal(relayedProgressSignal, { events: last.events.map(({ step, status, message }) => ({ step, status, message })) });
            cursor = last.events[last.events.length - 1].seq;
          }
          return cursor;
        }
        await ctx.sleep(RELAY_POLL_MS);
      }
    },
  };
}
