import { z } from 'zod';
import type { ScheduleSpec } from '@temporalio/client';
import { field } from '../../contract';

/**
 * Bodies of the schedule endpoints, and the timing rules: a 5-field cron expression (or
 * `@daily` and friends) OR an interval like `6h`, in an IANA time zone. Checked here so a
 * bad value is a 400 naming the field, never a schedule that does not do what was meant.
 */

// ---- cron -------------------------------------------------------------------------------

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

const CRON_FIELDS: Array<{ name: string; min: number; max: number; names?: string[]; namesFrom?: number }> = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS, namesFrom: 1 },
  { name: 'day of week', min: 0, max: 7, names: DAYS, namesFrom: 0 },
];

const CRON_SHORTHANDS = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];

/** Why a cron expression is not one Temporal reads the way a crontab does, or undefined when it is. */
export function cronProblem(expr: string): string | undefined {
  const e = expr.trim();
  if (CRON_SHORTHANDS.includes(e)) return undefined;
  if (e.startsWith('@')) return `unknown shorthand ${e.split(/\s/)[0]} (use ${CRON_SHORTHANDS.join(', ')}, or "interval" for @every)`;
  if (/^(CRON_)?TZ=/.test(e)) return 'put the time zone in "timezone", not in the expression';
  if (e.includes('#')) return 'comments (#) are not allowed';
  const parts = e.split(/\s+/);
  if (parts.length !== 5) return `must have 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`;
  for (const [i, part] of parts.entries()) {
    const f = CRON_FIELDS[i];
    const problem = cronFieldProblem(part, f);
    if (problem) return `${f.name} field "${part}": ${problem}`;
  }
  return undefined;
}

function cronFieldProblem(part: string, f: (typeof CRON_FIELDS)[number]): string | undefined {
  const value = (token: string): number | undefined => {
    if (/^\d{1,2}$/.test(token)) return Number(token);
    const idx = f.names?.indexOf(token.toUpperCase()) ?? -1;
    return idx >= 0 ? idx + (f.namesFrom ?? 0) : undefined;
  };
  for (const item of part.split(',')) {
    const m = /^([^/]+)(?:\/(\d{1,2}))?$/.exec(item);
    if (!m) return 'expected *, a value, a range a-b, a step /n, or a list of them';
    const [, range, step] = m;
    if (step !== undefined && Number(step) === 0) return 'a step must be at least 1';
    if (range === '*') continue;
    const [lo, hi, ...extra] = range.split('-');
    if (extra.length > 0) return `"${range}" is not a value or a range`;
    const a = value(lo);
    const b = hi === undefined ? a : value(hi);
    if (a === undefined || b === undefined) return `"${range}" is not a number${f.names ? ' or a name' : ''}`;
    if (a < f.min || b > f.max) return `values must be within ${f.min}-${f.max}`;
    if (b < a) return `range ${range} runs backwards`;
  }
  return undefined;
}

/** The values one field of a valid cron expression takes. */
function cronValues(part: string, f: (typeof CRON_FIELDS)[number]): number[] {
  const out = new Set<number>();
  for (const item of part.split(',')) {
    const [range, step] = item.split('/');
    const [lo, hi] = range === '*' ? [f.min, f.max] : range.split('-').map(Number);
    const last = hi ?? (step !== undefined ? f.max : lo);
    for (let v = lo; v <= last; v += Number(step ?? 1)) out.add(v);
  }
  return [...out].sort((a, b) => a - b);
}

const SHORTHAND_GAP_MIN: Record<string, number> = { '@hourly': 60 };

/**
 * The shortest time between two runs of a valid cron expression, in ms, judged by its
 * times of day (minute and hour fields): the day fields can only spread runs further.
 */
export function cronShortestGapMs(expr: string): number {
  const e = expr.trim();
  if (e.startsWith('@')) return (SHORTHAND_GAP_MIN[e] ?? 24 * 60) * 60_000;
  const [minute, hour] = e.split(/\s+/);
  const minutes = cronValues(minute, CRON_FIELDS[0]);
  const hours = cronValues(hour, CRON_FIELDS[1]);
  const times = hours.flatMap((h) => minutes.map((m) => h * 60 + m));
  let gap = 24 * 60 - times[times.length - 1] + times[0];
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i] - times[i - 1]);
  return gap * 60_000;
}

// ---- interval ---------------------------------------------------------------------------

const UNIT_MS: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 };
const MIN_INTERVAL_MS = 10_000;

/** `1d`, `6h`, `90m`, `1h30m`, `45s`: the length in ms, or undefined when it is not one. */
export function parseInterval(text: string): number | undefined {
  if (!/^(\d{1,6}[dhms])+$/.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)([dhms])/g)) ms += Number(n) * UNIT_MS[unit];
  return ms;
}

/** The reverse of parseInterval, for showing a schedule: 86400000 → `1d`, 5400000 → `1h30m`. */
export function formatInterval(ms: number): string {
  let rest = ms;
  let out = '';
  for (const unit of ['d', 'h', 'm', 's']) {
    const n = Math.floor(rest / UNIT_MS[unit]);
    if (n > 0) out += `${n}${unit}`;
    rest -= n * UNIT_MS[unit];
  }
  return out || '0s';
}

// ---- time zone --------------------------------------------------------------------------

/** The IANA name as the server knows it (`europe/paris` → `Europe/Paris`), or undefined when Intl does not know it. */
export function canonicalTimeZone(tz: string): string | undefined {
  // Intl also takes offsets like +01:00, which the server's time zone database does not.
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/.test(tz)) return undefined;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
  // Intl ignores case and maps aliases to other names (America/Argentina/Buenos_Aires →
  // America/Buenos_Aires): fix the case of a name, keep an alias as the operator wrote it.
  return resolved.toLowerCase() === tz.toLowerCase() ? resolved : tz;
}

// ---- bodies -----------------------------------------------------------------------------

/** Overlap policies a rebuild schedule may use. CANCEL_OTHER and TERMINATE_OTHER would stop a rebuild half-way, leaving no VM. */
const OVERLAP_POLICIES = ['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'ALLOW_ALL'] as const;

const cron = z
  .string({ error: 'cron must be a string like "0 3 * * *"' })
  .superRefine((v, ctx) => {
    const problem = cronProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const interval = z
  .string({ error: 'interval must be a string like "1d" or "6h"' })
  .superRefine((v, ctx) => {
    const ms = parseInterval(v);
    if (ms === undefined) ctx.addIssue({ code: 'custom', message: 'interval must be a duration like "1d", "6h", "90m" or "1h30m" (units d, h, m, s)' });
    else if (ms < MIN_INTERVAL_MS) ctx.addIssue({ code: 'custom', message: `interval must be at least ${MIN_INTERVAL_MS / 1000}s` });
  });

const timezone = z
  .string({ error: 'timezone must be an IANA time zone name like "Europe/Paris"' })
  .refine((v) => canonicalTimeZone(v) !== undefined, 'timezone must be an IANA time zone name like "Europe/Paris" or "UTC"');

const overlap = z.enum(OVERLAP_POLICIES, {
  error: `overlap must be one of ${OVERLAP_POLICIES.join(', ')} (CANCEL_OTHER and TERMINATE_OTHER would interrupt a rebuild half-way)`,
});

const note = z
  .string({ error: 'note must be a string' })
  .regex(/^[^\x00-\x1f\x7f]{0,500}$/, 'note must be at most 500 characters on one line');

const reason = z
  .string({ error: 'reason must be a string' })
  .regex(/^[^\x00-\x1f\x7f]{1,500}$/, 'reason must be 1 to 500 characters on one line');

const scheduleId = z
  .string({ error: 'id must be a string' })
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'id must be 1 to 100 letters, digits, ".", "_" or "-", starting with a letter or digit');

const passwd = field.passwd;

function oneTiming(body: { cron?: string; interval?: string }, ctx: z.RefinementCtx, required: boolean) {
  if (body.cron !== undefined && body.interval !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['interval'], message: 'give either cron or interval, not both' });
  } else if (required && body.cron === undefined && body.interval === undefined) {
    ctx.addIssue({ code: 'custom', path: ['cron'], message: 'give a cron expression ("cron") or an interval ("interval")' });
  }
}

/** What a schedule is made of, set at creation and changeable by an update. */
const scheduleFields = {
  /** A full install body (with `id`): runs rebuild that VM from it, and install it when it is missing. */
  spec: z.unknown().optional(),
  passwd: passwd.optional(),
  cron: cron.optional(),
  interval: interval.optional(),
  timezone: timezone.optional(),
  overlap: overlap.optional(),
  paused: z.boolean({ error: 'paused must be true or false' }).optional(),
  note: note.optional(),
};

export const createScheduleSchema = z
  .object({
    id: scheduleId.optional(),
    vmid: z.number({ error: 'vmid must be an integer' }).int('vmid must be an integer').min(100, 'vmid must be at least 100').max(999_999_999).optional(),
    ...scheduleFields,
  })
  .strict()
  .superRefine((body, ctx) => {
    oneTiming(body, ctx, true);
    if ((body.vmid === undefined) === (body.spec === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['vmid'], message: 'give either vmid (rebuild from the spec the VM records) or spec (a full install body with id)' });
    }
    if (body.spec !== undefined && body.passwd !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['passwd'], message: 'with spec, put passwd inside spec, as in an install body' });
    }
  });

export type CreateScheduleBody = z.infer<typeof createScheduleSchema>;

export const updateScheduleSchema = z
  .object(scheduleFields)
  .strict()
  .superRefine((body, ctx) => oneTiming(body, ctx, false));

export type UpdateScheduleBody = z.infer<typeof updateScheduleSchema>;

export const reasonSchema = z.object({ reason: reason.optional() }).strict();

// ---- to and from Temporal's ScheduleSpec -----------------------------------------------

/**
 * The schedule spec for a timing. A cron expression carries itself as the calendar's
 * comment: the server compiles cron into calendars, and the comment is how `show` gives
 * back the expression that was written.
 */
export function toScheduleSpec(t: { cron?: string; interval?: string; timezone?: string }): ScheduleSpec {
  const timezone = canonicalTimeZone(t.timezone ?? 'UTC') ?? 'UTC';
  if (t.cron !== undefined) {
    const c = t.cron.trim().replace(/\s+/g, ' ');
    return { cronExpressions: [`${c} # ${c}`], timezone };
  }
  return { intervals: [{ every: parseInterval(t.interval ?? '') ?? 0 }], timezone };
}

/** The timing a schedule was given, read back from its description. */
export function timingOf(spec: {
  timezone?: string;
  calendars?: ReadonlyArray<{ comment?: string }>;
  intervals?: ReadonlyArray<{ every: number | string }>;
}): { cron?: string; interval?: string; timezone: string } {
  const timezone = spec.timezone || 'UTC';
  const cal = spec.calendars?.[0];
  if (cal) return { cron: cal.comment || JSON.stringify(cal), timezone };
  const iv = spec.intervals?.[0];
  if (iv) return { interval: formatInterval(Number(iv.every)), timezone };
  return { timezone };
}
