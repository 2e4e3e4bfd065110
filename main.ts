/**
 * `npm start`: the whole service in one process. With no TEMPORAL_ADDRESS it runs its
 * own Temporal dev server (history in DATA_DIR/temporal.db, UI on TEMPORAL_UI_PORT);
 * with no MAIN_NODE it runs against the Proxmox sandbox cluster. QEMURUN_ROLE=api or
 * worker runs one half only, against the Temporal server and cluster its settings name.
 *
 * Exit status: 0 after SIGINT/SIGTERM, 78 when the set-up is wrong (a StartupError: a
 * setting, a port, a file, a program; one message, no stack trace), 1 on a crash.
 */
import './lib/dotEnv';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from './lib/config';
import type { DevServer } from './lib/temporal/devServer';
import type { SshKeyPair } from './lib/sshKey';
import { StartupError, EXIT_CRASH } from './lib/startupError';
import { startService } from './app/service';
import { realGuests, sandboxedConfig, sandboxTools, startSandbox, startImages } from './app/sandbox';
import { embeddedDevServer } from './app/devServer';
import { serviceSshKey } from './app/sshKey';
import { startRole } from './app/role';
import { RunRecords } from './lib/run/records';
import { ensureDataDir } from './lib/dataDir';
import { checkPortsFree } from './lib/run/ports';
import { servicePorts } from './lib/run/servicePorts';
import type { SandboxToolPaths } from './app/sandbox';
import { createLogger, type Logger } from './lib/observability/log';
import { installTemporalRuntime } from './lib/observability/runtime';
import { describeNodeVersions } from './lib/nodeVersions';

/** A step to undo on shutdown (or when a later start-up step fails). */
type Stop = () => Promise<void>;

/**
 * The workflow bundle `npm run build` made beside the compiled main.js; run from the
 * TypeScript sources there is none, and the worker bundles the workflows at start-up.
 */
function prebuiltWorkflowBundle(): string | undefined {
  const bundle = path.join(__dirname, 'workflow-bundle.js');
  return fs.existsSync(bundle) ? bundle : undefined;
}

function onStopSignals(stop: Stop, logger: Logger): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`${signal}: shutting down`);
    await stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ level: config.logLevel });
  ensureDataDir(config.dataDir, logger);
  if (config.role !== 'all') {
    const role = await startRole(config, config.role, prebuiltWorkflowBundle(), logger);
    console.log(role.banner.join('\n'));
    onStopSignals(role.stop, logger);
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
    for (const line of await run.stopLeftovers()) logger.info(line);
    await checkPortsFree(servicePorts(config));
    // After the port check: the SDK's metrics exporter listens from here on.
    installTemporalRuntime({ logger, level: config.logLevel, metricsAddress: config.temporalMetricsAddress });
    // The sandbox's tools before anything is made: a missing sshd leaves no key behind.
    tools = config.sandbox ? await sandboxTools(config) : undefined;
    key = serviceSshKey(config);
  } catch (err) {
    run.release();
    throw err;
  }

  const stops: Stop[] = [];
  const stopAll = async () => {
    for (const stop of stops) await stop().catch((err: unknown) => logger.error({ err }, 'shutdown step failed'));
    run.release();
  };
  try {
    const guests = config.sandbox ? await realGuests(config) : undefined;
    const sandbox = config.sandbox && tools ? await startSandbox(config, key, run, tools, guests) : undefined;
    if (sandbox) {
      // VMs keep running across restarts of the service, as on a real cluster (docs/sandbox.md).
      stops.unshift(async () => {
        await sandbox.stop({ keepVms: true });
        for (const node of Object.keys(sandbox.sshdPids)) run.forget(`sandbox-sshd-${node}`);
      });
    }

    const mirror = await startImages(config, guests);
    if (mirror) stops.push(() => mirror.stop());
    // From here on the service talks to the sandbox's nodes and the mirror's images.
    const serviceConfig = sandboxedConfig(config, sandbox, mirror);

    let devServer: DevServer | undefined;
    let temporalAddress = serviceConfig.temporal.address;
    if (!temporalAddress) {
      const server = await embeddedDevServer(serviceConfig, run, logger);
      devServer = server;
      temporalAddress = server.address;
      stops.push(async () => {
        await server.stop();
        run.forget('temporal-dev-server');
      });
    }

    const service = await startService({
      config: serviceConfig,
      temporalAddress,
      mainNodeEnv: sandbox?.envFor(serviceConfig.mainNode),
      workflowBundlePath: prebuiltWorkflowBundle(),
      logger,
    });
    stops.unshift(() => service.stop());

    const lines = [
      sandbox
        ? `*** SANDBOX MODE: MAIN_NODE is not set, so VMs are created on a simulated Proxmox cluster (${Object.keys(serviceConfig.nodes).join(', ')}; ${describeNodeVersions(service.nodeVersions)}) in ${sandbox.dir}. Nothing touches a real Proxmox. ***`
        : `Proxmox cluster: main node ${serviceConfig.mainNode}, nodes ${Object.keys(serviceConfig.nodes).join(', ')} (${describeNodeVersions(service.nodeVersions)})`,
      `API:         http://127.0.0.1:${serviceConfig.port}/api  (health: /api/health, readiness: /api/health/ready)`,
      ...(sandbox?.api
        ? [
            `Proxmox API: ${sandbox.api.url}/api2/json (the sandbox's; certificate SHA-256 ${sandbox.api.fingerprint}; token ${sandbox.api.token.tokenid}, its secret in ${path.join(sandbox.dir, 'sandbox', 'api', 'tokens.json')})`,
          ]
        : []),
      devServer
        ? `Temporal:    embedded dev server at ${devServer.address} (${devServer.source}), history in ${path.join(serviceConfig.dataDir, 'temporal.db')}`
        : `Temporal:    ${temporalAddress}, namespace ${serviceConfig.temporal.namespace}`,
      ...(devServer?.uiUrl ? [`Temporal UI: ${devServer.uiUrl}`] : []),
      mirror
        ? guests?.files.length
          ? `Images:      built-in mirror at ${mirror.origin}: real Debian ${guests.files.map((f) => f.version).join(', ')} images built on this machine, stand-ins of the other OS versions`
          : `Images:      built-in mirror at ${mirror.origin}: small stand-in images of every OS version, served locally (set IMAGE_BASE_* for real ones)`
        : `Images:      ${serviceConfig.imageBase.debian}, ${serviceConfig.imageBase.ubuntu}, ${serviceConfig.imageBase.rockylinux}`,
      ...(guests
        ? [`Guests:      real QEMU machines under ${guests.accel.toUpperCase()} (SANDBOX_GUESTS=qemu); their apt-get reaches ${serviceConfig.sandboxOptions.guestArchive} through the sandbox only`]
        : []),
      `Task queue:  ${serviceConfig.temporal.taskQueue}`,
    ];
    console.log(lines.join('\n'));
  } catch (err) {
    await stopAll();
    throw err;
  }

  onStopSignals(stopAll, logger);
}

main().catch((err) => {
  if (err instanceof StartupError) {
    console.error(`qemurun: ${err.message}`);
    process.exit(err.exitCode);
  }
  console.error(err);
  process.exit(EXIT_CRASH);
});
