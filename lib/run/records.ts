import fs from 'node:fs';
import path from 'node:path';
import { commandLine, descendants, isAlive, procStartTime } from './procfs';
import { StartupError } from '../startupError';
import { writeFileAtomic } from '../atomicFile';

/**
 * The processes this service starts (itself, the embedded Temporal dev server, the sandbox
 * nodes' sshd), each recorded in DATA_DIR/run/<name>.json with its pid and start time. A
 * process killed with SIGKILL cannot stop its children; the next start reads these records
 * and stops what is left, and only that: a pid whose start time differs is someone else's.
 */

export interface ProcessRecord {
  /** For messages: "Temporal dev server", "sandbox node pve1's sshd". */
  what: string;
  pid: number;
  starttime: string;
}

const SERVICE = 'qemurun';

export class RunRecords {
  constructor(readonly dir: string) {}

  private file(name: string): string {
    return path.join(this.dir, `${name}.json`);
  }

  record(name: string, what: string, pid: number): void {
    const starttime = procStartTime(pid);
    // Gone already: nothing to clean up later.
    if (starttime === undefined) return;
    // Private like every file in DATA_DIR: which processes run, and as what, is the operator's business.
    writeFileAtomic(this.file(name), JSON.stringify({ what, pid, starttime } satisfies ProcessRecord), 0o600);
  }

  forget(name: string): void {
    fs.rmSync(this.file(name), { force: true });
  }

  read(name: string): ProcessRecord | undefined {
    try {
      return JSON.parse(fs.readFileSync(this.file(name), 'utf8')) as ProcessRecord;
    } catch {
      return undefined;
    }
  }

  names(): string[] {
    let files: string[];
    try {
      files = fs.readdirSync(this.dir);
    } catch {
      return [];
    }
    return files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -'.json'.length));
  }

  /**
   * Records this process as the service of DATA_DIR. Two services on one data dir would
   * share a Temporal database and a sandbox cluster: refused, naming the other one.
   */
  claim(): void {
    const other = this.read(SERVICE);
    if (other && other.pid !== process.pid && isAlive(other.pid, other.starttime)) {
      throw new StartupError(
        `QemuRun is already running with DATA_DIR=${path.dirname(this.dir)} (pid ${other.pid}); ` +
          'stop it first, or give this one another DATA_DIR',
      );
    }
    this.record(SERVICE, 'QemuRun', process.pid);
  }

  release(): void {
    const own = this.read(SERVICE);
    if (own?.pid === process.pid) this.forget(SERVICE);
  }

  /**
   * Stops what a previous run left behind (it was killed before it could) and forgets
   * every record but the service's own. Returns one line per process stopped.
   */
  async stopLeftovers(): Promise<string[]> {
    const stopped: string[] = [];
    for (const name of this.names()) {
      if (name === SERVICE) continue;
      const rec = this.read(name);
      if (rec && isAlive(rec.pid, rec.starttime)) {
        await stopProcessTree(rec);
        stopped.push(`stopped the ${rec.what} left running by a previous run (pid ${rec.pid}: ${commandLine(rec.pid)})`);
      }
      this.forget(name);
    }
    return stopped;
  }
}

/**
 * SIGTERM to the process and its descendants (sshd's per-connection children call setsid,
 * so its process group would miss them), SIGKILL to whatever is left after `graceMs`.
 */
async function stopProcessTree(rec: ProcessRecord, graceMs = 10_000): Promise<void> {
  const pids = [...descendants(rec.pid), rec.pid];
  const targets = pids.map((pid) => ({ pid, starttime: procStartTime(pid) }));
  const signal = (sig: NodeJS.Signals) => {
    for (const t of targets) {
      if (t.starttime === undefined || !isAlive(t.pid, t.starttime)) continue;
      try {
        process.kill(t.pid, sig);
      } catch {
        // gone meanwhile
      }
    }
  };
  const anyAlive = () => targets.some((t) => t.starttime !== undefined && isAlive(t.pid, t.starttime));
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (anyAlive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (anyAlive()) {
    signal('SIGKILL');
    while (anyAlive() && Date.now() < deadline + 5000) await new Promise((r) => setTimeout(r, 50));
  }
}
