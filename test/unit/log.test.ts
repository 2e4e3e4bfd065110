import { Writable } from 'node:stream';
import { createLogger, temporalLogger } from '../../lib/observability/log';
import { loadConfig } from '../../lib/config';

/** The service's logger: JSON lines for machines, readable lines for people, secrets hidden. */

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, stream };
}

test('JSON lines with level, time and message; fields named like a secret are hidden at any depth', () => {
  const { lines, stream } = capture();
  const log = createLogger({ level: 'info', pretty: false, destination: stream });
  log.info({ vmid: 120, passwd: 'hunter2-secret', spec: { password: 'nested-secret', user: 'debian' } }, 'configured');
  log.debug('not at info');
  expect(lines).toHaveLength(1);
  const record = JSON.parse(lines[0]) as Record<string, unknown>;
  expect(record).toMatchObject({ level: 30, msg: 'configured', vmid: 120, passwd: '<hidden>', spec: { password: '<hidden>', user: 'debian' } });
  expect(lines[0]).not.toContain('secret');
});

test('on a terminal the same record is a readable line, not JSON', () => {
  const { lines, stream } = capture();
  createLogger({ level: 'info', pretty: true, destination: stream }).warn({ node: 'pve2' }, 'node did not answer');
  expect(lines[0]).toMatch(/WARN.*node did not answer/);
  expect(() => JSON.parse(lines[0])).toThrow();
  expect(lines.join('\n')).toContain('node: "pve2"');
});

test("the Temporal SDK's log goes through it with its attributes and levels", () => {
  const { lines, stream } = capture();
  const sdk = temporalLogger(createLogger({ level: 'debug', pretty: false, destination: stream }));
  sdk.info('activity completed', { workflowId: 'install-1', activity: 'importDisk', attempt: 2, vmid: 120, taskToken: 'abc' });
  sdk.log('WARN', 'activity failed', { error: new Error('qm said no') });
  sdk.trace('below the level');
  expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
    expect.objectContaining({ level: 30, msg: 'activity completed', workflowId: 'install-1', activity: 'importDisk', attempt: 2, vmid: 120, taskToken: '<hidden>' }),
    expect.objectContaining({ level: 40, msg: 'activity failed', error: { message: 'qm said no', name: 'Error' } }),
  ]);
});

test('LOG_LEVEL takes either spelling and refuses others, naming the setting', () => {
  expect(loadConfig({}).logLevel).toBe('info');
  expect(loadConfig({ LOG_LEVEL: 'WARN' }).logLevel).toBe('warn');
  expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL: must be one of trace, debug/);
  expect(() => loadConfig({ TEMPORAL_METRICS_ADDRESS: '9464' })).toThrow(/TEMPORAL_METRICS_ADDRESS: must be <host>:<port>/);
});
