import { testNamespace } from '../support/namespaces';
import { Client, Connection } from '@temporalio/client';
import { canonicalTimeZone, cronProblem, formatInterval, parseInterval, timingOf, toScheduleSpec } from '../../api/schedules/request';

/**
 * The schedule timing rules. Every expression the API accepts is also given to the real
 * Temporal server (the dev server of this test run), which must accept it and compute the
 * same next times a crontab would: the API's check and the server never disagree.
 */

const VALID_CRON = ['0 3 * * *', '*/15 * * * *', '30 2 * * 1-5', '0 0 1 JAN,JUL *', '0 12 * * MON-WED,FRI', '5 4 * * 0,7', '0 */6 1-15/2 * *', '@daily', '@hourly', '@weekly'];

test.each(VALID_CRON)('cron %s is accepted', (expr) => {
  expect(cronProblem(expr)).toBeUndefined();
});

test.each<[string, RegExp]>([
  ['60 * * * *', /minute field "60": values must be within 0-59/],
  ['0 24 * * *', /hour field "24": values must be within 0-23/],
  ['0 0 0 * *', /day of month field "0": values must be within 1-31/],
  ['0 0 * 13 *', /month field "13"/],
  ['0 0 * * 8', /day of week field "8"/],
  ['0 0 * * FUNDAY', /day of week field "FUNDAY": "FUNDAY" is not a number or a name/],
  ['*/0 * * * *', /a step must be at least 1/],
  ['0 0 * * * 2030', /must have 5 fields/],
  ['0 3 * * * # nightly', /comments/],
  ['@every 1h', /unknown shorthand @every .*"interval"/],
  ['TZ=Europe/Paris 0 3 * * *', /put the time zone in "timezone"/],
  ['0 3 L * *', /day of month field "L"/],
])('cron %s is refused: %s', (expr, problem) => {
  expect(cronProblem(expr)).toMatch(problem);
});

test('intervals', () => {
  expect(parseInterval('1d')).toBe(86_400_000);
  expect(parseInterval('6h')).toBe(21_600_000);
  expect(parseInterval('1h30m')).toBe(5_400_000);
  expect(parseInterval('45s')).toBe(45_000);
  for (const bad of ['', '1', 'd', '1 d', '1w', '-1h', '1.5h', 'PT1H']) expect(parseInterval(bad)).toBeUndefined();
  for (const text of ['1d', '6h', '1h30m', '2d12h', '90s']) expect(formatInterval(parseInterval(text)!)).toBe(text.replace('90s', '1m30s'));
});

test('time zones: IANA names, canonical spelling; offsets and unknown names refused', () => {
  expect(canonicalTimeZone('UTC')).toBe('UTC');
  expect(canonicalTimeZone('Europe/Paris')).toBe('Europe/Paris');
  expect(canonicalTimeZone('europe/paris')).toBe('Europe/Paris');
  expect(canonicalTimeZone('America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires');
  expect(canonicalTimeZone('US/Pacific')).toBe('US/Pacific');
  for (const bad of ['Mars/Olympus', '+01:00', 'GMT+1 ', '', 'Europe/../etc']) expect(canonicalTimeZone(bad)).toBeUndefined();
});

describe('the real server agrees', () => {
  let connection: Connection;
  let client: Client;
  beforeAll(async () => {
    connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
    client = new Client({ connection, namespace: testNamespace() });
  });
  afterAll(async () => {
    await connection?.close();
  });

  test.each([
    ...VALID_CRON.map((cron) => ({ cron, timezone: 'Europe/Paris' })),
    { interval: '6h', timezone: 'Europe/Paris' },
    { interval: '1h30m', timezone: 'UTC' },
    { cron: '0 3 * * *', timezone: 'America/Argentina/Buenos_Aires' },
    { cron: '0 3 * * *', timezone: 'US/Pacific' },
  ])('%j', async (timing) => {
    const scheduleId = `check-${Math.random().toString(36).slice(2, 10)}`;
    const handle = await client.schedule.create({
      scheduleId,
      spec: toScheduleSpec(timing),
      action: { type: 'startWorkflow', workflowType: 'nothing', taskQueue: 'nobody-polls-this', args: [] },
      state: { paused: true },
    });
    try {
      const d = await handle.describe();
      expect(d.info.nextActionTimes.length).toBeGreaterThan(0);
      expect(timingOf(d.spec)).toEqual(timing);
      if ('cron' in timing && timing.cron === '0 3 * * *') {
        const local = new Intl.DateTimeFormat('en-GB', { timeZone: timing.timezone, hour: '2-digit', minute: '2-digit' });
        for (const t of d.info.nextActionTimes) expect(local.format(t)).toBe('03:00');
      }
    } finally {
      await handle.delete();
    }
  });
});
