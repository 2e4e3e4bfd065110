import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { ensureSearchAttributes } from '../../lib/temporal/connect';
import { REPO_ROOT } from '../../lib/repoRoot';
import { freePorts } from '../../sandbox/testkit';

/**
 * The Temporal server itself (not `temporal server start-dev`) on a private PostgreSQL
 * cluster, configured by the same deploy/temporal/qemurun.yaml as docker-compose.yml.
 * The server and its schema tool come from scripts/install-temporal-server.sh, PostgreSQL
 * from Debian's `postgresql` package.
 */

export interface RealTemporal {
  address: string;
  namespace: string;
  /** Stops the server process and starts a new one on the same ports and database. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const TOOLS = path.join(REPO_ROOT, '.tools');
export const TEMPORAL_SERVER_BIN = path.join(TOOLS, 'bin', 'temporal-server');
export const TEMPORAL_SQL_TOOL_BIN = path.join(TOOLS, 'bin', 'temporal-sql-tool');
export const TEMPORAL_SCHEMA_DIR = path.join(TOOLS, 'temporal-server', 'schema', 'postgresql', 'v12');
/** The server configuration docker-compose.yml mounts too, and its --env name. */
export const TEMPORAL_CONFIG_DIR = path.join(REPO_ROOT, 'deploy', 'temporal');
export const TEMPORAL_CONFIG_ENV = 'qemurun';
const NAMESPACE = 'default';
const PG_USER = 'temporal';

/** Why the real server cannot run here, or undefined when it can. */
export function realTemporalMissing(): string | undefined {
  for (const f of [TEMPORAL_SERVER_BIN, TEMPORAL_SQL_TOOL_BIN, TEMPORAL_SCHEMA_DIR]) {
    if (!fs.existsSync(f)) return `${f} is missing: run scripts/install-temporal-server.sh`;
  }
  if (!postgresBin()) return 'PostgreSQL is not installed: apt-get install postgresql';
  return undefined;
}

/** The newest PostgreSQL server binaries Debian installed (/usr/lib/postgresql/<major>/bin). */
function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  const majors = fs.existsSync(root) ? fs.readdirSync(root).filter((d) => /^\d+$/.test(d)).map(Number) : [];
  const dir = majors.sort((a, b) => b - a).map((m) => path.join(root, String(m), 'bin')).find((d) => fs.existsSync(path.join(d, 'initdb')));
  return dir;
}

/**
 * initdb refuses to run as root: as root, PostgreSQL runs as the `postgres` account the
 * Debian package creates, and owns its folder.
 */
function asPostgres(cmd: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

async function runAsPostgres(cmd: string, args: string[]): Promise<void> {
  const [file, argv] = asPostgres(cmd, args);
  await execa(file, argv, { stdin: 'ignore' });
}

export async function startRealTemporal(opts: { dataDir?: string } = {}): Promise<RealTemporal> {
  const missing = realTemporalMissing();
  if (missing) throw new Error(missing);
  const pgBin = postgresBin()!;
  const ownDir = opts.dataDir === undefined;
  const dir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-temporal-'));
  fs.mkdirSync(dir, { recursive: true });
  const pgData = path.join(dir, 'pg');
  const socketDir = path.join(dir, 'pg-socket');
  const passwordFile = path.join(dir, 'pg-password');
  const portsFile = path.join(dir, 'ports.json');

  // A data dir from an earlier run keeps its database, password and ports.
  const fresh = !fs.existsSync(path.join(pgData, 'PG_VERSION'));
  if (!fs.existsSync(passwordFile)) fs.writeFileSync(passwordFile, crypto.randomBytes(18).toString('base64url'), { mode: 0o600 });
  const password = fs.readFileSync(passwordFile, 'utf8').trim();
  const ports: number[] = fs.existsSync(portsFile) ? JSON.parse(fs.readFileSync(portsFile, 'utf8')) : await allocatePorts();
  fs.writeFileSync(portsFile, JSON.stringify(ports));
  const [pgPort, frontend, frontendHttp, frontendMembership, history, historyMembership, matching, matchingMembership, worker, workerMembership] = ports;

  if (process.getuid?.() === 0) {
    fs.chownSync(dir, uidOf('postgres'), gidOf('postgres'));
    fs.chmodSync(dir, 0o700);
  }
  fs.mkdirSync(socketDir, { recursive: true });
  if (process.getuid?.() === 0) fs.chownSync(socketDir, uidOf('postgres'), gidOf('postgres'));

  if (fresh) {
    // The password file is read by initdb, which runs as postgres: hand it a copy it owns.
    const pwCopy = path.join(socketDir, 'initdb-password');
    fs.writeFileSync(pwCopy, password, { mode: 0o600 });
    if (process.getuid?.() === 0) fs.chownSync(pwCopy, uidOf('postgres'), gidOf('postgres'));
    try {
      await runAsPostgres(path.join(pgBin, 'initdb'), [
        '-D', pgData, '-U', PG_USER, '--pwfile', pwCopy, '--auth', 'scram-sha-256',
        '-E', 'UTF8', '--locale', 'C', '--no-sync',
      ]);
    } finally {
      fs.rmSync(pwCopy, { force: true });
    }
  }
  const pgCtl = path.join(pgBin, 'pg_ctl');
  await runAsPostgres(pgCtl, [
    'start', '-w', '-t', '60', '-D', pgData, '-l', path.join(socketDir, 'postgres.log'),
    // A test database: losing it to a power cut is fine, waiting for fsync on a shared disk is not.
    '-o', `-p ${pgPort} -k ${socketDir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`,
  ]);
  const stopPostgres = () => runAsPostgres(pgCtl, ['stop', '-m', 'fast', '-w', '-D', pgData]);

  let server: { child: ChildProcess; exited: Promise<void> } | undefined;
  // If the test process dies without stop(), take the server and database down with it.
  const onExit = () => {
    server?.child.kill('SIGKILL');
    const [file, argv] = asPostgres(pgCtl, ['stop', '-m', 'immediate', '-D', pgData]);
    spawnSync(file, argv, { stdio: 'ignore' });
  };
  process.once('exit', onExit);

  const env = {
    ...process.env,
    POSTGRES_SEEDS: '127.0.0.1',
    DB_PORT: String(pgPort),
    POSTGRES_USER: PG_USER,
    POSTGRES_PWD: password,
    BIND_ON_IP: '127.0.0.1',
    TEMPORAL_BROADCAST_ADDRESS: '127.0.0.1',
    FRONTEND_GRPC_PORT: String(frontend),
    FRONTEND_HTTP_PORT: String(frontendHttp),
    FRONTEND_MEMBERSHIP_PORT: String(frontendMembership),
    HISTORY_GRPC_PORT: String(history),
    HISTORY_MEMBERSHIP_PORT: String(historyMembership),
    MATCHING_GRPC_PORT: String(matching),
    MATCHING_MEMBERSHIP_PORT: String(matchingMembership),
    WORKER_GRPC_PORT: String(worker),
    WORKER_MEMBERSHIP_PORT: String(workerMembership),
    DYNAMIC_CONFIG_FILE_PATH: path.join(TEMPORAL_CONFIG_DIR, 'dynamicconfig.yaml'),
    LOG_LEVEL: process.env.TEST_TEMPORAL_LOG_LEVEL ?? 'warn',
  };
  const address = `127.0.0.1:${frontend}`;
  const logFile = path.join(dir, 'temporal.log');

  try {
    await execa('sh', [path.join(TEMPORAL_CONFIG_DIR, 'setup-postgres.sh')], {
      env: { ...env, SQL_TOOL: TEMPORAL_SQL_TOOL_BIN, SCHEMA_DIR: TEMPORAL_SCHEMA_DIR },
      stdin: 'ignore',
    });
  } catch (err) {
    process.removeListener('exit', onExit);
    await stopPostgres().catch(() => undefined);
    throw err;
  }

  const launch = () => {
    const out = fs.openSync(logFile, 'a');
    const child = spawn(
      TEMPORAL_SERVER_BIN,
      // --config is relative to --root (an absolute one is joined onto it too).
      ['--root', REPO_ROOT, '--config', path.relative(REPO_ROOT, TEMPORAL_CONFIG_DIR), '--env', TEMPORAL_CONFIG_ENV, '--allow-no-auth', 'start'],
      { cwd: REPO_ROOT, env, stdio: ['ignore', out, out] },
    );
    fs.closeSync(out);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    server = { child, exited };
  };
  const stopServer = async () => {
    if (!server) return;
    const { child, exited } = server;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    server = undefined;
  };
  const ready = async () => {
    try {
      await waitUntilServing(address, () => server?.child, logFile);
    } catch (err) {
      await stopServer();
      throw err;
    }
  };

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', onExit);
    await stopServer();
    await stopPostgres().catch(() => undefined);
    if (ownDir && !process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    launch();
    await ready();
    await prepareNamespace(address);
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    address,
    namespace: NAMESPACE,
    async restart() {
      await stopServer();
      launch();
      await ready();
      await namespaceServing(address);
    },
    stop,
  };
}

async function allocatePorts(): Promise<number[]> {
  // Consecutive ports below the ephemeral range, so a restart finds them still free.
  const base = await freePorts(10);
  return Array.from({ length: 10 }, (_, i) => base + i);
}

function uidOf(user: string): number {
  return Number(spawnSync('id', ['-u', user], { encoding: 'utf8' }).stdout.trim());
}
function gidOf(user: string): number {
  return Number(spawnSync('id', ['-g', user], { encoding: 'utf8' }).stdout.trim());
}

async function retry<T>(what: string, fn: () => Promise<T>, timeoutMs: number, check?: () => void): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    check?.();
    try {
      return await fn();
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms: ${String(last).split('\n')[0]}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function withConnection<T>(address: string, fn: (c: Connection) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address, connectTimeout: 2000 });
  try {
    return await fn(connection);
  } finally {
    await connection.close();
  }
}

async function waitUntilServing(address: string, child: () => ChildProcess | undefined, logFile: string): Promise<void> {
  const alive = () => {
    const c = child();
    if (!c || c.exitCode !== null || c.signalCode !== null) {
      const tail = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n') : '';
      throw new Error(`temporal-server exited (${c?.signalCode ?? c?.exitCode}); its log ends:\n${tail}`);
    }
  };
  await retry(
    `temporal-server did not answer on ${address}`,
    () => withConnection(address, (c) => c.workflowService.getSystemInfo({}).then(() => undefined)),
    90_000,
    alive,
  );
}

/**
 * Registers the namespace and the product's search attributes (as an operator does once
 * for a new cluster), then waits until a workflow can really start in it: a new namespace
 * reaches the history and matching services' caches a few seconds after it is created.
 */
async function prepareNamespace(address: string): Promise<void> {
  await withConnection(address, async (connection) => {
    await retry('registering the namespace', async () => {
      try {
        await connection.workflowService.registerNamespace({
          namespace: NAMESPACE,
          workflowExecutionRetentionPeriod: msToTs('1 day'),
        });
      } catch (err) {
        if (!/already exists|already registered/i.test(String(err))) throw err;
      }
    }, 30_000);
    await retry('registering search attributes', () => ensureSearchAttributes(connection, NAMESPACE), 30_000);
  });
  await namespaceServing(address);
}

/** A workflow starts (no worker needed) and the visibility store answers a search-attribute query. */
async function namespaceServing(address: string): Promise<void> {
  await withConnection(address, async (connection) => {
    const client = new Client({ connection, namespace: NAMESPACE });
    await retry('the namespace did not serve workflows', async () => {
      const handle = await client.workflow.start('readinessProbe', {
        taskQueue: 'qemurun-readiness-probe',
        workflowId: `readiness-probe-${Date.now()}-${Math.random().toString(36).slice(2)}`,
      });
      await handle.terminate('readiness probe');
      await client.workflow.count('VmId = 0');
    }, 60_000);
  });
}
