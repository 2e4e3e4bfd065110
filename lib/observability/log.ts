import pino, { type Logger, type LevelWithSilent } from 'pino';
import type { Logger as TemporalLogger, LogLevel as TemporalLogLevel, LogMetadata } from '@temporalio/common';

export type { Logger };

/** LOG_LEVEL takes pino's names and the Temporal SDK's upper-case ones alike. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/**
 * Field names whose values are never written, whatever object they turn up in: defence in
 * depth behind code that should not log them in the first place.
 */
const SECRET_FIELDS = ['passwd', 'password', 'rootPassword', 'passwdHash', 'cipassword', 'apiToken', 'token', 'authorization', 'privateKey', 'secrets', 'taskToken', 'userData'];
const REDACT_PATHS = SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]);

export interface LoggerOptions {
  level: LevelWithSilent;
  /** Human-readable lines instead of JSON; default: when stdout is a terminal. */
  pretty?: boolean;
  /** Where lines go (tests); default stdout. */
  destination?: pino.DestinationStream;
}

/**
 * The service's logger: one JSON object per line (what log shippers read) unless stdout is
 * a terminal, where pino-pretty prints readable lines. pino-pretty is loaded only then.
 */
export function createLogger(opts: LoggerOptions): Logger {
  const base: pino.LoggerOptions = {
    level: opts.level,
    base: { service: 'qemurun' },
    redact: { paths: REDACT_PATHS, censor: '<hidden>' },
  };
  const pretty = opts.pretty ?? (opts.destination === undefined && process.stdout.isTTY === true);
  if (pretty) {
    const pinoPretty = require('pino-pretty') as typeof import('pino-pretty');
    const prettyStream = pinoPretty({
      colorize: opts.destination === undefined,
      ignore: 'pid,hostname,service',
      sync: true,
      ...(opts.destination ? { destination: opts.destination } : {}),
    });
    return pino(base, prettyStream);
  }
  // process.stdout itself (synchronous on Linux for files, pipes and terminals): lines are
  // out before an exit, and whoever watches process.stdout (a test) sees them.
  return pino(base, opts.destination ?? process.stdout);
}

const TEMPORAL_TO_PINO: Record<TemporalLogLevel, pino.Level> = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };

/**
 * The Temporal SDK's logger (worker, activity context and, forwarded, its native core)
 * writing through pino, so its lines carry the same shape and redaction as the service's.
 */
export function temporalLogger(logger: Logger): TemporalLogger {
  const log = (level: TemporalLogLevel, message: string, meta?: LogMetadata) => {
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(meta ?? {})) fields[k] = v instanceof Error ? { message: v.message, name: v.name } : v;
    logger[TEMPORAL_TO_PINO[level]](fields, message);
  };
  return {
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}

/** The Temporal SDK's level for a pino level (it has no fatal or silent). */
export function temporalLevel(level: LevelWithSilent): TemporalLogLevel {
  if (level === 'fatal' || level === 'silent') return 'ERROR';
  return level.toUpperCase() as TemporalLogLevel;
}
