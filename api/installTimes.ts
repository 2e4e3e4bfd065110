import { z } from 'zod';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Config } from '../lib/config';
import { OS_VERSIONS, progressQuery, type ProgressEvent } from '../contract';
import { listWorkflows } from '../lib/temporal/workflowListing';
import { InvalidRequestError } from './errors';
import { stepTimeline, type StepSpan } from './stepTimeline';
import * as answers from './openapi/responses';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

/** Every progress event of an operation, page after page of its progress query. */
export async function readAllEvents(handle: WorkflowHandle): Promise<ProgressEvent[]> {
  const events: ProgressEvent[] = [];
  for (let after = 0; ; ) {
    const page = await handle.query(progressQuery, after);
    events.push(...page.events);
    after = page.events.at(-1)?.seq ?? page.lastSeq;
    if (page.events.length === 0 || after >= page.lastSeq) return events;
  }
}

/** An install that cloned its OS version's template, else one built from the cloud image. */
export function sourceOf(steps: readonly StepSpan[]): 'template' | 'image' {
  return steps.some((s) => s.step === 'VM creation > qm clone') ? 'template' : 'image';
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Per source, the median time of each step over the installs that had it, in the order steps began. */
export function stepMedians(installs: ReadonlyArray<readonly StepSpan[]>) {
  const bySource = { image: [] as Array<readonly StepSpan[]>, template: [] as Array<readonly StepSpan[]> };
  for (const steps of installs) bySource[sourceOf(steps)].push(steps);
  return Object.fromEntries(
    Object.entries(bySource).map(([source, runs]) => {
      const times = new Map<string, number[]>();
      for (const steps of runs) for (const s of steps) times.set(s.step, [...(times.get(s.step) ?? []), s.ms]);
      return [source, { installs: runs.length, steps: [...times].map(([step, ms]) => ({ step, medianMs: median(ms), installs: ms.length })) }];
    }),
  );
}

const MAX_LAST = 20;

/**
 * `GET /api/installs/step-medians?os=&version=&last=`: where the time of the last N
 * completed installs of an OS version went, step by step, template installs beside image
 * installs. One visibility query and one progress read per install, made only when asked.
 */
export const installTimeRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: (deps: { client: Client; config: Config }) => deps,
  routes: [
    {
      method: 'GET',
      path: '/installs/step-medians',
      summary: 'The median time of each step over the last completed installs of an OS version, template installs beside image installs',
      query: {
        os: { schema: z.enum(['debian', 'ubuntu', 'rockylinux']), description: 'the OS' },
        version: { schema: z.string(), description: 'one of its versions' },
        last: { schema: z.string().regex(/^\d{1,2}$/), description: 'how many installs, 1 to 20 (default 10)' },
      },
      answers: { 200: { description: 'the medians per source', json: answers.stepMedians }, 400: err('os, version or last is not valid (named)') },
      handle: async ({ client, config }, req, res) => {
        const { os, version, last } = req.query;
        const versions: readonly string[] | undefined = typeof os === 'string' && Object.hasOwn(OS_VERSIONS, os) ? OS_VERSIONS[os as keyof typeof OS_VERSIONS] : undefined;
        if (!versions) throw new InvalidRequestError(`os: must be one of ${Object.keys(OS_VERSIONS).join(', ')}`);
        if (typeof version !== 'string' || !versions.includes(version)) throw new InvalidRequestError(`version: must be one of ${os as string}'s: ${versions.join(', ')}`);
        const n = last === undefined ? 10 : typeof last === 'string' && /^\d{1,2}$/.test(last) ? Number(last) : NaN;
        if (!(n >= 1 && n <= MAX_LAST)) throw new InvalidRequestError(`last: must be a whole number from 1 to ${MAX_LAST}`);
        const query = `WorkflowType = 'installVm' AND VmOs = '${os as string}-${version}' AND ExecutionStatus = 'Completed' AND TaskQueue = '${config.temporal.taskQueue.replace(/['\\]/g, '\\$&')}'`;
        const installs: StepSpan[][] = [];
        for await (const wf of listWorkflows(client, query, n)) {
          const events = await readAllEvents(client.workflow.getHandle(wf.execution?.workflowId ?? '', wf.execution?.runId ?? undefined)).catch(() => undefined);
          if (events) installs.push(stepTimeline(events, true));
          if (installs.length >= n) break;
        }
        res.json({ success: true, os, version, ...stepMedians(installs) });
      },
    },
  ],
});
