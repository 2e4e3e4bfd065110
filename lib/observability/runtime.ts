import { Runtime } from '@temporalio/worker';
import type { LevelWithSilent } from 'pino';
import { temporalLevel, temporalLogger, type Logger } from './log';

/**
 * The Temporal SDK's process-wide runtime, set up once before any connection or worker:
 * its log (and, forwarded, its native core's) written through the service's logger, and,
 * when `metricsAddress` is set, its own Prometheus exporter (worker task slots, poll and
 * task latencies, workflow and activity counts) listening there.
 */
export function installTemporalRuntime(opts: { logger: Logger; level: LevelWithSilent; metricsAddress?: string }): void {
  const level = temporalLevel(opts.level);
  Runtime.install({
    logger: temporalLogger(opts.logger.child({ component: 'temporal' })),
    telemetryOptions: {
      logging: { filter: { core: level, other: 'ERROR' }, forward: {} },
      ...(opts.metricsAddress ? { metrics: { prometheus: { bindAddress: opts.metricsAddress } } } : {}),
    },
  });
}
