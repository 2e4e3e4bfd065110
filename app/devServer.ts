import path from 'node:path';
import type { Config } from '../lib/config';
import { findTemporalCli, startDevServer, type DevServer } from '../lib/temporal/devServer';
import type { RunRecords } from '../lib/run/records';
import { StartupError, reason } from '../lib/startupError';
import type { Logger } from '../lib/observability/log';

/** With no TEMPORAL_ADDRESS: a Temporal dev server of our own, supervised, history in DATA_DIR. */
export function embeddedDevServer(config: Config, run: RunRecords, logger: Logger): Promise<DevServer> {
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
    codecEndpoint: codecEndpointFor(config.apiHost, config.port),
    supervise: true,
    onSpawn: (pid) => run.record('temporal-dev-server', 'Temporal dev server', pid),
    log: (line) => logger.warn({ component: 'temporal-dev-server' }, line),
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

function findTemporalCliOrUndefined(explicit: string) {
  try {
    return findTemporalCli(explicit);
  } catch {
    return undefined;
  }
}

/**
 * Where the browser showing the embedded UI reaches the API's codec endpoint: the address
 * the API listens on, or loopback when it listens on every address (which includes loopback).
 */
export function codecEndpointFor(apiHost: string, port: number): string {
  const everywhere = apiHost === '0.0.0.0' || apiHost === '::' || apiHost === '[::]';
  const host = everywhere ? '127.0.0.1' : apiHost.includes(':') && !apiHost.startsWith('[') ? `[${apiHost}]` : apiHost;
  return `http://${host}:${port}/codec`;
}
