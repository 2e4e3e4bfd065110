import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from '../state/paths';
import { readIfExists } from '../state/files';

/**
 * One line per authenticated API request, appended when it is answered: the API's
 * counterpart of the CLIs' call log, for tests to assert on what the cluster was asked.
 */
export interface ApiRequestRecord {
  /** The node of the path (`/nodes/{node}/…`); absent for cluster-wide paths. */
  node?: string;
  method: string;
  /** Below `/api2/json`, e.g. `/nodes/pve1/qemu/100/status/start`. */
  path: string;
  /** Query and body parameters as sent (the path's are in `path`), `cipassword` masked. */
  params: Record<string, string>;
  status: number;
  /** The task the request started, when it answered a UPID. */
  upid?: string;
  startedAt: string;
  durationMs: number;
}

function logFile(dir: string): string {
  return path.join(clusterPaths(dir).apiDir, 'requests.jsonl');
}

export function appendApiRequest(dir: string, rec: ApiRequestRecord): void {
  const params = rec.params.cipassword === undefined ? rec.params : { ...rec.params, cipassword: '**********' };
  fs.mkdirSync(path.dirname(logFile(dir)), { recursive: true });
  // One write() of one line with O_APPEND, as the call log.
  fs.appendFileSync(logFile(dir), JSON.stringify({ ...rec, params }) + '\n');
}

export function readApiRequests(dir: string): ApiRequestRecord[] {
  return (readIfExists(logFile(dir)) ?? '')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ApiRequestRecord);
}
