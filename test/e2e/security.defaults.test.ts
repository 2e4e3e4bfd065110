import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../lib/config';
import { toInstallSpec } from '../../api/installRequest';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { cipasswordMatches } from '../support/guest';

/**
 * No usable default passwords. The seed gave every VM's root `0123456789` (shown by the
 * unauthenticated `GET /sh/<os>.sh`) and the cloud-init user `passwd`, and a rebuild with
 * no body reset the password to that. Now: root locked unless VM_ROOT_PASSWORD, no
 * cloud-init password unless the request names one, a rebuild keeps the VM's hash, and
 * the old defaults only behind UNSAFE_DEFAULT_PASSWORDS.
 */

let h: Harness;
const BARE = 141;
const KEPT = 142;

beforeAll(async () => {
  h = await startHarness();
  for (const body of [{ id: BARE }, { id: KEPT, passwd: 'Keep-Me-0ver' }]) {
    const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', ...body } });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  }
});

afterAll(async () => {
  await h?.stop();
});

const shadowOf = (vmid: number) => fs.readFileSync(path.join(h.dir, 'cluster', 'guests', String(vmid), 'root', 'etc', 'shadow'), 'utf8');

test('GET /sh/debian_12.sh reveals no password', async () => {
  const res = await fetch(`${h.service.url}/sh/debian_12.sh`);
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text).not.toContain('0123456789');
  expect(text).toMatch(/passwd -l root/);
});

test('an install without passwd and without VM_ROOT_PASSWORD sets no usable password', async () => {
  const conf = (await h.sandbox.readConfig(BARE))!;
  expect(conf).not.toMatch(/^cipassword:/m);
  // cloud-init's user has a locked password: login with the injected keys only.
  expect(shadowOf(BARE)).toMatch(/^debian:!:/m);
  // The init script locked root's password instead of setting a known one.
  const log = await h.sandbox.guestLog(BARE);
  expect(log).toMatch(/root: passwd -l root$/m);
  expect(log).not.toMatch(/chpasswd/);
});

test('a rebuild with no body keeps the VM\'s password hash', async () => {
  const before = /^cipassword: (\S+)$/m.exec((await h.sandbox.readConfig(KEPT))!)![1];
  expect(cipasswordMatches((await h.sandbox.readConfig(KEPT))!, 'Keep-Me-0ver')).toBe(true);
  const res = await requestSse(`${h.api}/vm/${KEPT}/rebuild`, { method: 'POST' });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const after = (await h.sandbox.readConfig(KEPT))!;
  expect(/^cipassword: (\S+)$/m.exec(after)![1]).toBe(before);
  expect(cipasswordMatches(after, 'passwd')).toBe(false);
  // ...and a rebuild of a VM that had none leaves it without one.
  const bare = await apiCall(h.api, 'POST', `/vm/${BARE}/rebuild`);
  expect(bare.status).toBe(200);
  expect((await h.sandbox.readConfig(BARE))!).not.toMatch(/^cipassword:/m);
});

test('a password like "error" or "p" leaves the error message whole: secrets are kept out, not substituted', async () => {
  for (const [vmid, passwd] of [[143, 'error'], [144, 'p']] as const) {
    const stderr = '400 Parameter verification failed.\nsshkeys: unexpected error in cloudinit config: SSH public key rejected';
    await h.sandbox.injectFault({ command: `qm set ${vmid}`, stderr, times: 1 });
    const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', id: vmid, passwd } });
    const failed = res.events.at(-1)!;
    expect(failed.status).toBe('error');
    expect(failed.message).toContain('unexpected error in cloudinit config: SSH public key rejected');
    expect(res.body).not.toContain('<hidden>ublic');
    expect(res.body).not.toMatch(/unexpected <hidden>/);
    // Nothing half-built is left.
    expect(await h.sandbox.readConfig(vmid)).toBeUndefined();
  }
});

test('the seed\'s defaults come back only with UNSAFE_DEFAULT_PASSWORDS=1', () => {
  const safe = loadConfig({});
  expect(safe.rootPassword).toBeUndefined();
  expect(toInstallSpec({ os: 'debian', version: '12' }, safe, ['pve1']).secrets).toEqual({});
  const unsafe = loadConfig({ UNSAFE_DEFAULT_PASSWORDS: '1' });
  expect(unsafe.rootPassword).toBe('0123456789');
  expect(toInstallSpec({ os: 'debian', version: '12' }, unsafe, ['pve1']).secrets).toEqual({ passwd: 'passwd', rootPassword: '0123456789' });
  // A VM_ROOT_PASSWORD of the operator's own always wins.
  expect(loadConfig({ UNSAFE_DEFAULT_PASSWORDS: '1', VM_ROOT_PASSWORD: 'own-Root-pw' }).rootPassword).toBe('own-Root-pw');
  expect(() => loadConfig({ UNSAFE_DEFAULT_PASSWORDS: 'yes' })).toThrow(/UNSAFE_DEFAULT_PASSWORDS/);
});
