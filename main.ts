/**
 * `npm start`: the whole service in one process. With no TEMPORAL_ADDRESS it runs its
 * own Temporal dev server (history in DATA_DIR/temporal.db, UI on TEMPORAL_UI_PORT);
 * with no MAIN_NODE it runs against the Proxmox sandbox cluster. QEMURUN_ROLE=api or
 * worker runs one half only, against a Temporal server and a cluster of its settings.
 *
 * Exit status: 0 after SIGINT/SIGTERM, 78 when the set-up is wrong (a StartupError: a
 * setting, a port, a file, a program; one message, no stack trace), 1 on a crash.
 */
import 'dotenv/config';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, Config } from './lib/config';
import { findTemporalCli, startDevServer, DevServer } from './lib/temporal/devServer';
import { startService } from './lib/service';
import { ensureSshKey, SshKeyPair } from './lib/sshKey';
import { StartupError, EXIT_CRASH, reason } from './lib/startupError';
import { RunRecords } from './lib/run/records';
import { checkPortsFree } from './lib/run/ports';
import { servicePorts } from './lib/run/servicePorts';
import type { SandboxToolPaths } from './sandbox/requirements';
import { DefaultLogger, Runtime } from '@temporalio/worker';

// The worker's start-up chatter (webpack's bundle report) would bury the banner below.
Runtime.install({ logger: new DefaultLogger((process.env.LOG_LEVEL as 'WARN' | undefined) ?? 'WARN') });

/** A step to undo on shutdown (or when a later start-up step fails). */
type Stop = () => Promise<void>;

function sshKey(config: Config): SshKeyPair {
  try {
    return ensureSshKey(config.sshKeyPath);
  } catch (err) {
    throw new StartupError(
      `SSH_KEY_PATH=${config.sshKeyPath}: cannot read or create the SSH key (${reason(err).split('\n')[0]}); ` +
        'point SSH_KEY_PATH at a readable private key with its .pub beside it',
      undefined,
      { cause: err },
    );
  }
}

async function startSandbox(config: Config, key: SshKeyPair, run: RunRecords, tools: SandboxToolPaths) {
  const { startSandboxCluster } = await import('./sandbox/cluster');
  const cluster = await startSandboxCluster({
    dir: path.join(config.dataDir, 'sandbox'),
    nodes: config.sandboxOptions.nodes,
    mainNode: config.mainNode,
    gateway: config.gateway,
    vmSshPort: config.vmSshPort,
    bootDelayMs: config.sandboxOptions.bootDelayMs,
    packageSilenceMs: config.sandboxOptions.packageSilenceMs,
    sshPortBase: config.sandboxOptions.sshPortBase,
    rootAuthorizedKey: key.publicKey,
    sshdPath: tools.sshd,
  });
  for (const [node, pid] of Object.entries(cluster.sshdPids)) run.record(`sandbox-sshd-${node}`, `sandbox node ${node}'s sshd`, pid);
  // The nodes the rest of the service talks to are the sandbox's.
  config.nodes = cluster.nodeAddresses;
  return cluster;
}

/** Sandbox mode's own images, unless IMAGE_BASE_* name a source: a first run needs no network. */
async function startImages(config: Config) {
  if (!config.imageMirror) return undefined;
  const { startImageMirror } = await import('./sandbox/mirror/server');
  const mirror = await startImageMirror();
  config.imageBase = mirror.baseUrls;
  return mirror;
}

function embeddedDevServer(config: Config, run: RunRecords): Promise<DevServer> {
  const explicit = config.temporal.cliPath;
  if (explicit && !findTemporalCliOrUndefined(explicit)) {
    throw new StartupError(`TEMPORAL_CLI_PATH=${explicit} is not an executable file: fix the path, or unset it to use .tools/bin/temporal (npm run setup:temporal)`);
  }
  return startDevServer({
    cliPath: explicit,
    port: config.temporal.devPort,
    uiPort: config.temporal.uiPort,
    namespace: config.temporal.namespace,
    dbFile: path.join(config.dataDir, 'temporal.db'),
    logFile: path.join(config.dataDir, 'temporal.log'),
    // The UI decodes the encrypted history through the API's codec endpoint.
    codecEndpoint: `http://127.0.0.1:${config.port}/codec`,
    supervise: true,
    onSpawn: (pid) => run.record('temporal-dev-server', 'Temporal dev server', pid),
    log: (line) => console.error(line),
  }).catch((err: unknown) => {
    if (err instanceof StartupError) throw err;
    throw new StartupError(
      `the embedded Temporal dev server did not start: ${reason(err).split('\n')[0]}\n` +
        `its log is ${path.join(config.dataDir, 'temporal.log')}; npm run setup:temporal builds the CLI, or set TEMPORAL_ADDRESS to use another server`,
      undefined,
      { cause: err },
    );
  });
}

/**
 * The workflow bundle `npm run build` made beside the compiled main.js; run from the
 * TypeScript sources there is none, and the worker bundles the workflows at start-up.
 */
function prebuiltWorkflowBundle(): string | undefined {
  const bundle = path.join(__dirname, 'workflow-bundle.js');
  return fs.existsSync(bundle) ? bundle : undefined;
}

function findTemporalCliOrUndefined(explicit: string) {
  try {
    return findTemporalCli(explicit);
  } catch {
    return undefined;
  }
}

/**
 * One half of the service: the API (no worker) or a worker (no API, a health port). It
 * starts no process of its own: Temporal and the cluster are those its settings name,
 * shared with the other processes, so any of them may die and be replaced alone.
 */
async function runRole(config: Config, role: 'api' | 'worker'): Promise<Stop> {
  await checkPortsFree(servicePorts(config));
  // Workers log into nodes and guests; the API reads the nodes with the key if there is one
  // and never makes one (a key made on an API host would be trusted by no node).
  if (role === 'worker') sshKey(config);
  const temporalAddress = config.temporal.address!;
  const service = await startService({
    config,
    temporalAddress,
    worker: role === 'worker',
    api: role === 'api',
    workflowBundlePath: prebuiltWorkflowBundle(),
  });
  const lines =
    role === 'api'
      ? [
          `Role:        api (no worker here: workers in other processes poll the task queue)`,
          `API:         http://127.0.0.1:${config.port}/api  (health: /api/health, readiness: /api/health/ready)`,
        ]
      : [
          `Role:        worker ${service.worker?.options.identity ?? ''} (no API here)`,
          `Health:      ${service.url}/health  (readiness: /health/ready)`,
          `Cluster:     main node ${config.mainNode}, nodes ${Object.keys(config.nodes).join(', ')}`,
        ];
  lines.push(`Temporal:    ${temporalAddress}, namespace ${config.temporal.namespace}`, `Task queue:  ${config.temporal.taskQueue}`);
  console.log(lines.join('\n'));
  return () => service.stop();
}

function onStopSignals(stop: Stop): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: shutting down`);
    await stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

async function main(): Promise<void> {
  const config = loadConfig();
  fs.mkdirSync(config.dataDir, { recursive: true });
  if (config.role !== 'all') {
    onStopSignals(await runRole(config, config.role));
    return;
  }
  if (config.sandbox) {
    console.log('*** QemuRun is starting in SANDBOX MODE (MAIN_NODE is not set): no real Proxmox will be used. ***');
  }
  // Before anything is started: a previous run killed with SIGKILL left its children
  // running, and they hold the ports this run needs.
  const run = new RunRecords(path.join(config.dataDir, 'run'));
  run.claim();
  let key: SshKeyPair;
  let tools: SandboxToolPaths | undefined;
  try {
    for (const line of await run.stopLeftovers()) console.log(line);
    await checkPortsFree(servicePorts(config));
    // The sandbox's tools before anything is made: a missing sshd leaves no key behind.
    tools = config.sandbox ? await (await import('./sandbox/requirements')).ensureSandboxTools({ toolsPath: config.sandboxOptions.toolsPath }) : undefined;
    key = sshKey(config);
  } catch (err) {
    run.release();
    throw err;
  }

  const stops: Stop[] = [];
  const stopAll = async () => {
    for (const stop of stops) await stop().catch((err) => console.error('shutdown step failed:', err));
    run.release();
  };
  try {
    const sandbox = config.sandbox && tools ? await startSandbox(config, key, run, tools) : undefined;
    if (sandbox) {
      // VMs keep running across restarts of the service, as on a real cluster (docs/sandbox.md).
      stops.unshift(async () => {
        await sandbox.stop({ keepVms: true });
        for (const node of Object.keys(sandbox.sshdPids)) run.forget(`sandbox-sshd-${node}`);
      });
    }

    const mirror = await startImages(config);
    if (mirror) stops.push(() => mirror.stop());

    let devServer: DevServer | undefined;
    let temporalAddress = config.temporal.address;
    if (!temporalAddress) {
      const server = await embeddedDevServer(config, run);
      devServer = server;
      temporalAddress = server.address;
      stops.push(async () => {
        await server.stop();
        run.forget('temporal-dev-server');
      });
    }

    const service = await startService({
      config,
      temporalAddress,
      mainNodeEnv: sandbox?.envFor(config.mainNode),
      workflowBundlePath: prebuiltWorkflowBundle(),
    });
    stops.unshift(() => service.stop());

    const lines = [
      sandbox
        ? `*** SANDBOX MODE: MAIN_NODE is not set, so VMs are created on a simulated Proxmox cluster (${Object.keys(config.nodes).join(', ')}) in ${sandbox.dir}. Nothing touches a real Proxmox. ***`
        : `Proxmox cluster: main node ${config.mainNode}, nodes ${Object.keys(config.nodes).join(', ')}`,
      `API:         http://127.0.0.1:${config.port}/api  (health: /api/health, readiness: /api/health/ready)`,
      devServer
        ? `Temporal:    embedded dev server at ${devServer.address} (${devServer.source}), history in ${path.join(config.dataDir, 'temporal.db')}`
        : `Temporal:    ${temporalAddress}, namespace ${config.temporal.namespace}`,
      ...(devServer?.uiUrl ? [`Temporal UI: ${devServer.uiUrl}`] : []),
      mirror
        ? `Images:      built-in mirror at ${mirror.origin}: small stand-in images of every OS version, served locally (set IMAGE_BASE_* for real ones)`
        : `Images:      ${config.imageBase.debian}, ${config.imageBase.ubuntu}, ${config.imageBase.rockylinux}`,
      `Task queue:  ${config.temporal.taskQueue}`,
    ];
    console.log(lines.join('\n'));
  } catch (err) {
    await stopAll();
    throw err;
  }

  onStopSignals(stopAll);
}

main().catch((err) => {
  if (err instanceof StartupError) {
    console.error(`qemurun: ${err.message}`);
    process.exit(err.exitCode);
  }
  console.error(err);
  process.exit(EXIT_CRASH);
});
