import { installSpecSchema, checkInput, type InstallSpec } from '../../contract';
import { installAnswer } from '../support/installAnswer';

/**
 * `ip: "dhcp"` (issue 24): on the one schema, in the spec and what the worker accepts; a
 * seed-shaped body (whose `ip` the seed ignored) means what it meant.
 */

const base = { os: 'debian', version: '12' } as const;
const apiAnswer = (body: unknown) => installAnswer(body, { nodes: ['pve1'] });

test('"dhcp" reaches the spec, and the worker accepts it', () => {
  const spec = apiAnswer({ ...base, ip: 'dhcp' }) as InstallSpec;
  expect(spec).toMatchObject({ ip: 'dhcp' });
  expect(checkInput(installSpecSchema, spec, 'test')).toEqual(spec);
});

test("a seed client's address is ignored, as the seed ignored it: the spec has no ip", () => {
  expect(apiAnswer({ ...base, ip: '10.0.0.5', gateway: '10.0.0.1' })).toEqual({ os: 'debian', version: '12', cores: 1, ramMb: 512, diskGb: 16, user: 'debian' });
  expect(apiAnswer({ ...base, ip: '10.0.0.5/24' })).not.toHaveProperty('ip');
  expect(apiAnswer({ ...base, ip: '' })).not.toHaveProperty('ip');
});

test.each<[string, unknown]>([
  ['another word', 'static'],
  ['upper case', 'DHCP'],
  ['a number', 5],
  ['an object', { mode: 'dhcp' }],
  ['an address with text', '10.0.0.5; rm -rf /'],
])('a bad ip (%s) is a 400 naming ip', (_name, ip) => {
  expect(apiAnswer({ ...base, ip })).toMatch(/^ip: must be "dhcp"/);
});

test('a spec with any other ip is refused by the worker', () => {
  expect(() => checkInput(installSpecSchema, { ...base, cores: 1, ramMb: 512, diskGb: 16, user: 'debian', ip: '10.0.0.5' }, 'test')).toThrow(/ip: /);
});
