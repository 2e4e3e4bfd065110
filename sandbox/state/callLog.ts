import fs from 'node:fs';
import path from 'node:path';
import { clusterPaths } from './paths';
import { readIfExists } from './files';

/** One line per CLI invocation, appended when it ends, for tests to assert on. */
export interface CallRecord {
  node: string;
  argv: string[];
  exitCode: number;
  startedAt: string;
  durationMs: number;
  /**
   * From the process's start to the command's: Node's start-up and loading the CLI's
   * modules, the sandbox's own cost on top of what the command does.
   */
  startupMs?: number;
  /** Answered by the cluster's resident CLI server rather than a Node process of its own. */
  resident?: boolean;
}

export function appendCall(dir: string, rec: CallRecord): void {
  const file = clusterPaths(dir).callLog;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // One write() of one line with O_APPEND: concurrent processes do not interleave.
  fs.appendFileSync(file, JSON.stringify(rec) + '\n');
}

export function readCalls(dir: string): CallRecord[] {
  const raw = readIfExists(clusterPaths(dir).callLog) ?? '';
  return raw
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CallRecord);
}
