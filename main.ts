/**
 * `npm start`: the whole service in one process. With no TEMPORAL_ADDRESS it runs its
 * own Temporal dev server (history in DATA_DIR/temporal.db, UI on TEMPORAL_UI_PORT);
 * with no MAIN_NODE it runs against the Proxmox sandbox cluster.
 */
import 'dotenv/config';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, Config } from './lib/config';
import { startDevServer, DevServer } from './lib/temporal/devServer';
import { startService } from './lib/service';
import { ensureSshKey } from './lib/sshKey';
import { StartupError } from './lib/startupError';
import { DefaultLogger, Runtime } from '@temporalio/worker';

// The worker's start-up chatter (webpack's bundle report) would bury the banner below.
Runtime.install({ logger: new DefaultLogger((process.env.LOG_LEVEL as 'WARN' | undefined) ?? 'WARN') });

async function startSandbox(config: Config) {
  const { startSandboxCluster } = await import('./sandbox/cluster');
  const { ensureSandboxTools } = await import('./sandbox/requirements');
  const tools = await ensureSandboxTools({ toolsPath: config.sandboxOptions.toolsPath });
  const key = ensureSshKey(config.sshKeyPath);
  const cluster = await startSandboxCluster({
    dir: path.join(config.dataDir, 'sandbox'),
    nodes: config.sandboxOptions.nodes,
    mainNode: config.mainNode,
    gateway: config.gateway,
    vmSshPort: config.vmSshPort,
    bootDelayMs: config.sandboxOptions.bootDelayMs,
    sshPortBase: config.sandboxOptions.sshPortBase,
    rootAuthorizedKey: key.publicKey,
    sshdPath: tools.sshd,
  });
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

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  fs.mkdirSync(config.dataDir, { recursive: true });
  if (config.sandbox) {
    console.log('*** QemuRun is starting in SANDBOX MODE (MAIN_NODE is not set): no real Proxmox will be used. ***');
  }
  const stops: Array<() => Promise<void>> = [];

  const sandbox = config.sandbox ? await startSandbox(config) : undefined;
  if (sandbox) stops.unshift(() => sandbox.stop());
  const mirror = await startImages(config);
  if (mirror) stops.push(() => mirror.stop());

  let devServer: DevServer | undefined;
  let temporalAddress = config.temporal.address;
  if (!temporalAddress) {
    devServer = await startDevServer({
      cliPath: config.temporal.cliPath,
      port: config.temporal.devPort,
      uiPort: config.temporal.uiPort,
      namespace: config.temporal.namespace,
      dbFile: path.join(config.dataDir, 'temporal.db'),
      logFile: path.join(config.dataDir, 'temporal.log'),
      // The UI decodes the encrypted history through the API's codec endpoint.
      codecEndpoint: `http://127.0.0.1:${config.port}/codec`,
    });
    temporalAddress = devServer.address;
    stops.push(() => devServer!.stop());
  }

  const service = await startService({
    config,
    temporalAddress,
    mainNodeEnv: sandbox?.envFor(config.mainNode),
  });
  stops.unshift(() => service.stop());

  const lines = [
    sandbox
      ? `*** SANDBOX MODE: MAIN_NODE is not set, so VMs are created on a simulated Proxmox cluster (${Object.keys(config.nodes).join(', ')}) in ${sandbox.dir}. Nothing touches a real Proxmox. ***`
      : `Proxmox cluster: main node ${config.mainNode}, nodes ${Object.keys(config.nodes).join(', ')}`,
    `API:         http://127.0.0.1:${config.port}/api  (health: /api/health)`,
    mirror
      ? `Images:      built-in mirror at ${mirror.origin}: small stand-in images of every OS version, served locally (set IMAGE_BASE_* for real ones)`
      : `Images:      ${config.imageBase.debian}, ${config.imageBase.ubuntu}, ${config.imageBase.rockylinux}`,
    devServer
      ? `Temporal:    embedded dev server at ${devServer.address} (${devServer.source}), history in ${path.join(config.dataDir, 'temporal.db')}`
      : `Temporal:    ${temporalAddress}, namespace ${config.temporal.namespace}`,
    ...(devServer?.uiUrl ? [`Temporal UI: ${devServer.uiUrl}`] : []),
    `Task queue:  ${config.temporal.taskQueue}`,
  ];
  console.log(lines.join('\n'));

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: shutting down`);
    for (const stop of stops) await stop().catch((err) => console.error('shutdown step failed:', err));
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((err) => {
  if (err instanceof StartupError) {
    console.error(err.message);
    process.exit(err.exitCode);
  }
  console.error(err);
  process.exit(1);
});
