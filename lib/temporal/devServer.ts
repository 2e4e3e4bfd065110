import fs from 'node:fs';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import { ALL_SEARCH_ATTRIBUTES } from '../../contract';
import { REPO_ROOT } from '../repoRoot';
import { startReadOnlyUi, type ReadOnlyUi } from './readOnlyUi';
import { freePort } from '../network';

/**
 * Runs a local Temporal dev server (`temporal server start-dev`) when no TEMPORAL_ADDRESS
 * is configured. We start the binary ourselves instead of letting the SDK do it: the SDK
 * gives an existing binary only 5 s to come up, which a cold start on 2 cores can miss,
 * and its default executable is a download this machine cannot make.
 */

export interface DevServer {
  address: string;
  uiUrl?: string;
  /** Where the CLI binary came from, for the start-up banner. */
  source: string;
  /** The server process now running (it changes when a supervised server is restarted). */
  readonly pid?: number;
  stop(): Promise<void>;
}

export interface DevServerOptions {
  cliPath?: string;
  /** SQLite file; history survives restarts. Undefined keeps state in memory. */
  dbFile?: string;
  ip?: string;
  port: number;
  /** UI port; undefined runs headless. */
  uiPort?: number;
  namespace: string;
  /** Further namespaces to create at launch, with the same search attributes. */
  extraNamespaces?: string[];
  /** The payload codec endpoint the embedded UI calls to decode history. */
  codecEndpoint?: string;
  logFile?: string;
  readyTimeoutMs?: number;
  /** Restart the server whenever it exits unasked (main's embedded server). */
  supervise?: boolean;
  /** Called with the pid of every server process started, for the run records. */
  onSpawn?: (pid: number) => void;
  /** Where the supervisor reports restarts. */
  log?: (line: string) => void;
}

export const LOCAL_CLI_PATH = path.join(REPO_ROOT, '.tools', 'bin', 'temporal');

const SA_TYPE_NAMES: Record<string, string> = {
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.DATETIME]: 'Datetime',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList',
};

function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** TEMPORAL_CLI_PATH, then `temporal` on PATH, then the project's .tools folder. */
export function findTemporalCli(explicit?: string): { path: string; source: string } | undefined {
  if (explicit) {
    if (!isExecutable(explicit)) throw new Error(`TEMPORAL_CLI_PATH: ${explicit} is not an executable file`);
    return { path: explicit, source: 'TEMPORAL_CLI_PATH' };
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'temporal');
    if (dir && isExecutable(candidate)) return { path: candidate, source: 'PATH' };
  }
  if (isExecutable(LOCAL_CLI_PATH)) return { path: LOCAL_CLI_PATH, source: '.tools/bin (npm run setup:temporal)' };
  return undefined;
}

function searchAttributeFlags(): string[] {
  return ALL_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=${SA_TYPE_NAMES[k.type]}`]);
}

const namespaceFlags = (namespaces: string[] = []): string[] => namespaces.flatMap((n) => ['--namespace', n]);

async function waitForFrontend(address: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`temporal dev server exited with code ${child.exitCode}`);
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await conn.workflowService.getSystemInfo({});
        return;
      } finally {
        await conn.close();
      }
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`temporal dev server did not answer on ${address} within ${timeoutMs} ms: ${String(lastError)}`);
}

/**
 * A workflow task that schedules an activity gets the activity task in its answer when its
 * worker can run it, instead of that worker polling for it: one round trip less per step
 * (docs/deployment.md says what a production server needs).
 */
const EAGER_ACTIVITIES = ['--dynamic-config-value', 'system.enableActivityEagerExecution=true'];

/**
 * SQLite's write-ahead log instead of its default rollback journal: each of the server's
 * transactions writes its pages once, to the log, instead of to a journal and then the
 * database, and readers do not wait for the writer. Commits still sync (synchronous stays
 * FULL), so a crash of the machine loses nothing either. The dev server holds every
 * install's history in that one file; under 50 installs its writes were the queue that
 * workflow tasks waited in.
 */
const SQLITE_WAL = ['--sqlite-pragma', 'journal_mode=wal'];

/**
 * The dev server's files hold the whole history (search attributes and failure messages in
 * clear) and its log: private to the service's user whatever DATA_DIR's mode. Files made
 * before are closed to others at each start; new ones are made so by the server's umask.
 */
function makePrivate(opts: DevServerOptions): void {
  const files = [opts.logFile, ...(opts.dbFile ? ['', '-wal', '-shm'].map((s) => `${opts.dbFile}${s}`) : [])];
  for (const f of files) {
    if (f !== undefined && fs.existsSync(f)) fs.chmodSync(f, 0o600);
  }
}

/** `temporal` run with umask 077: SQLite makes the database, its WAL and shm files 0644 & ~umask. */
const PRIVATE_UMASK = ['-c', 'umask 077 && exec "$0" "$@"'];

export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  const address = `${ip}:${opts.port}`;
  const found = opts.cliPath ? { path: opts.cliPath, source: 'given path' } : findTemporalCli();
  // The UI server of `start-dev` listens on a port of its own; TEMPORAL_UI_PORT is its read-only face.
  const uiInner = opts.uiPort === undefined ? undefined : await freePort(ip);
  if (!found) return startWithSdkDownload(opts, ip, uiInner);

  if (opts.dbFile) fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  makePrivate(opts);
  const args = [
    'server', 'start-dev',
    '--ip', ip,
    '--port', String(opts.port),
    '--namespace', opts.namespace,
    ...namespaceFlags(opts.extraNamespaces),
    '--log-level', 'warn',
    // The version check calls home; this machine may have no internet.
    '--dynamic-config-value', 'frontend.enableServerVersionCheck=false',
    ...EAGER_ACTIVITIES,
    ...searchAttributeFlags(),
  ];
  if (opts.dbFile) args.push('--db-filename', opts.dbFile, ...SQLITE_WAL);
  if (uiInner === undefined) args.push('--headless');
  else args.push('--ui-port', String(uiInner));
  if (opts.codecEndpoint) args.push('--ui-codec-endpoint', opts.codecEndpoint);

  const launch = () => {
    const out = opts.logFile ? fs.openSync(opts.logFile, 'a', 0o600) : 'ignore';
    // exec keeps the pid: the run records and stop() see the server itself.
    const child = spawn('/bin/sh', [...PRIVATE_UMASK, found.path, ...args], { stdio: ['ignore', out, out], detached: false });
    if (typeof out === 'number') fs.closeSync(out);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    return { child, exited };
  };
  let current = launch();
  let stopping = false;

  let ui: ReadOnlyUi | undefined;
  const stop = async () => {
    stopping = true;
    await ui?.stop();
    const { child, exited } = current;
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await waitForFrontend(address, current.child, opts.readyTimeoutMs ?? 60_000);
    if (opts.uiPort !== undefined && uiInner !== undefined) ui = await startReadOnlyUi({ host: ip, port: opts.uiPort, upstreamPort: uiInner });
  } catch (err) {
    await stop();
    throw err;
  }
  if (opts.supervise) void supervise();

  /**
   * Restarts the server whenever it exits without stop(): on the same database file and
   * port, so history is intact and the worker and clients, which retry, reconnect by
   * themselves. A restart that fails (the port taken meanwhile) is retried with backoff.
   */
  async function supervise(): Promise<void> {
    let backoffMs = 500;
    for (;;) {
      await current.exited;
      if (stopping) return;
      const { exitCode, signalCode } = current.child;
      opts.log?.(`Temporal dev server exited (${signalCode ?? `code ${exitCode}`}); restarting it on the same database`);
      await new Promise((r) => setTimeout(r, backoffMs));
      if (stopping) return;
      current = launch();
      try {
        await waitForFrontend(address, current.child, opts.readyTimeoutMs ?? 60_000);
        opts.log?.(`Temporal dev server is back at ${address}`);
        backoffMs = 500;
      } catch (err) {
        if (stopping) return;
        opts.log?.(`Temporal dev server did not come back: ${(err as Error).message}`);
        if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill('SIGKILL');
        backoffMs = Math.min(backoffMs * 2, 10_000);
      }
    }
  }

  return {
    address,
    uiUrl: ui?.url,
    source: found.source,
    get pid() {
      return current.child.pid;
    },
    stop,
  };
}

/**
 * Last resort for users with internet: the SDK downloads and runs the dev server. This is
 * why @temporalio/testing is a runtime dependency and not a dev one: the download is its
 * TestWorkflowEnvironment.createLocal (loaded only when this runs).
 */
async function startWithSdkDownload(opts: DevServerOptions, ip: string, uiInner: number | undefined): Promise<DevServer> {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      ip,
      port: opts.port,
      namespace: opts.namespace,
      dbFilename: opts.dbFile,
      ui: uiInner !== undefined,
      uiPort: uiInner,
      searchAttributes: ALL_SEARCH_ATTRIBUTES,
      extraArgs: [...EAGER_ACTIVITIES, ...namespaceFlags(opts.extraNamespaces), ...(opts.codecEndpoint ? ['--ui-codec-endpoint', opts.codecEndpoint] : [])],
    },
  });
  makePrivate(opts);
  const ui = opts.uiPort !== undefined && uiInner !== undefined ? await startReadOnlyUi({ host: ip, port: opts.uiPort, upstreamPort: uiInner }) : undefined;
  return {
    address: env.address,
    uiUrl: ui?.url,
    source: 'downloaded by the Temporal SDK',
    async stop() {
      await ui?.stop();
      await env.teardown();
    },
  };
}
