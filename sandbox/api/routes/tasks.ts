import type { Req, Route } from '../http';
import { ApiError, paramExc } from '../errors';
import { appendTaskLine, listTasks, readExitStatus, readTaskLog, taskLogFile, taskRunning, type TaskEntry } from '../tasks';
import { decodeUpid } from '../upid';
import fs from 'node:fs';

/** /nodes/{node}/tasks (pve-manager's API2::Tasks). */

/** convert_token_task: a token's task shows the user and the token apart. */
function shown(u: { user: string }): { user: string; tokenid?: string } {
  const m = /^(.+@[^!]+)!(.+)$/.exec(u.user);
  return m ? { user: m[1], tokenid: m[2] } : { user: u.user };
}

/** A token sees its own tasks; anything else needs Sys.Audit on the node. */
function mayRead(r: Req, taskUser: string): boolean {
  return taskUser === r.user || r.can(`/nodes/${r.params.node}`, ['Sys.Audit']);
}

function taskOf(r: Req) {
  const u = decodeUpid(r.params.upid);
  if (!u) throw paramExc({ upid: 'unable to parse worker upid' });
  const file = taskLogFile(r.dir, r.params.upid)!;
  if (u.node !== r.params.node || !fs.existsSync(file)) throw paramExc({ upid: 'no such task' });
  if (!mayRead(r, u.user)) r.check(`/nodes/${r.params.node}`, ['Sys.Audit']);
  return { u, file };
}

const int = (min: number) => ({ type: 'integer' as const, optional: true, minimum: min });

function normalised(status: string | undefined): string {
  if (!status) return 'unknown';
  if (status === 'OK') return 'ok';
  if (/^WARNINGS: \d+$/.test(status)) return 'warning';
  return status === 'unexpected status' ? 'unknown' : 'error';
}

export const taskRoutes: Route[] = [
  {
    method: 'GET',
    path: '/nodes/{node}/tasks',
    props: {
      start: int(0),
      limit: int(0),
      userfilter: { type: 'string', optional: true },
      typefilter: { type: 'string', optional: true },
      vmid: { type: 'integer', optional: true },
      errors: { type: 'boolean', optional: true },
      source: { type: 'string', optional: true, enum: ['archive', 'active', 'all'] },
      since: { type: 'integer', optional: true },
      until: { type: 'integer', optional: true },
      statusfilter: { type: 'string', optional: true },
    },
    handle: (r) => {
      const p = r.params;
      const source = p.source ?? 'archive';
      const start = Number(p.start ?? 0);
      let limit = Number(p.limit ?? 50);
      const wanted = p.statusfilter && p.errors !== '1' ? new Set(p.statusfilter.toLowerCase().split(/[,;\s]+/)) : undefined;
      let count = 0;
      const out: Array<Record<string, unknown>> = [];
      const keep = (t: TaskEntry) => {
        if (p.userfilter && !t.user.toLowerCase().includes(p.userfilter.toLowerCase())) return false;
        if (!mayRead(r, t.user)) return false;
        if (p.typefilter && t.type !== p.typefilter) return false;
        if (p.vmid && t.id !== p.vmid) return false;
        if (p.since && t.starttime < Number(p.since)) return false;
        if (p.until && t.starttime > Number(p.until)) return false;
        const type = t.running ? 'unknown' : normalised(t.status);
        if (p.errors === '1' && type === 'ok') return false;
        if (wanted && !wanted.has(type)) return false;
        if (count++ < start) return false;
        return limit > 0;
      };
      for (const t of listTasks(r.dir, p.node)) {
        if (t.running ? source === 'archive' : source === 'active') continue;
        if (!keep(t)) continue;
        limit--;
        const { running, subdir, ...rest } = t as TaskEntry & { subdir?: string };
        void subdir;
        out.push({ ...rest, ...shown(t), ...(running ? { status: 'RUNNING' } : {}) });
      }
      r.extra.total = count;
      return out;
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/tasks/{upid}/status',
    handle: (r) => {
      const { u } = taskOf(r);
      const running = taskRunning(u);
      const { subdir, ...rest } = u;
      void subdir;
      return { ...rest, ...shown(u), upid: r.params.upid, status: running ? 'running' : 'stopped', ...(running ? {} : { exitstatus: readExitStatus(taskLogFile(r.dir, r.params.upid)!) }) };
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/tasks/{upid}/log',
    props: { start: int(0), limit: int(0), download: { type: 'boolean', optional: true } },
    handle: (r) => {
      const { file } = taskOf(r);
      if (r.params.download === '1') {
        if (r.params.start !== undefined || r.params.limit !== undefined) throw new ApiError(500, "'download' cannot be used together with 'start' or 'limit' parameters\n");
        throw new ApiError(501, 'sandbox: download of a task log is not implemented\n');
      }
      const { total, lines } = readTaskLog(file, Number(r.params.start ?? 0), Number(r.params.limit ?? 50));
      r.extra.total = total;
      return lines;
    },
  },
  {
    method: 'DELETE',
    path: '/nodes/{node}/tasks/{upid}',
    handle: async (r) => {
      const { u, file } = taskOf(r);
      if (u.user !== r.user) r.check(`/nodes/${r.params.node}`, ['Sys.Modify']);
      if (taskRunning(u)) {
        try {
          process.kill(u.pid, 'SIGTERM');
        } catch {
          // ended meanwhile
        }
        // A worker stopped while it was still starting (a spare not yet through its
        // start-up) dies of the signal without writing its end: write it for it, as
        // PVE's task ends with this line however it was stopped.
        for (let i = 0; i < 40 && taskRunning(u); i++) await new Promise((res) => setTimeout(res, 50));
        if (!taskRunning(u) && readExitStatus(file) === 'unexpected status') appendTaskLine(file, 'TASK ERROR: received interrupt');
      }
      return null;
    },
  },
];
