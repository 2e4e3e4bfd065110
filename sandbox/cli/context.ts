import fs from 'node:fs';
import { clusterPaths, type ClusterPaths } from '../state/paths';
import { loadModel, type ClusterModel } from '../state/model';
import type { FaultSpec } from '../state/faults';

/** What one CLI call knows: which cluster, which node it runs on, and its own output. */
export interface Ctx {
  dir: string;
  node: string;
  model: ClusterModel;
  paths: ClusterPaths;
  out(line: string): void;
  err(line: string): void;
  /** Faults injected into a step of this call's work (FaultSpec.at), fired there by the command. */
  stepFaults?: FaultSpec[];
}

/** Where a call's output goes: its own stdout and stderr, or (resident server) a buffer. */
export interface CtxOutput {
  out(line: string): void;
  err(line: string): void;
}

// Synchronous writes: lines reach a reader (the service's onLine) as they are printed,
// and nothing is lost when the process exits right after.
const processOutput: CtxOutput = {
  out: (line) => writeAll(1, line + '\n'),
  err: (line) => writeAll(2, line + '\n'),
};

export function makeCtx(dir: string, node: string, output: CtxOutput = processOutput): Ctx {
  return { dir, node, model: loadModel(dir), paths: clusterPaths(dir), out: output.out, err: output.err };
}

function writeAll(fd: number, text: string): void {
  const buf = Buffer.from(text);
  for (let off = 0; off < buf.length; ) {
    try {
      off += fs.writeSync(fd, buf, off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') continue; // a non-blocking pipe that is full: retry
      if (code === 'EPIPE') return; // the reader went away
      throw e;
    }
  }
}
