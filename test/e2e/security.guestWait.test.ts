import { execa } from 'execa';
import { startHarness, Harness } from '../support/harness';
import { requestSse } from '../support/sse';
import { apiCall } from '../support/api';
import { eventually } from '../../sandbox/testkit';
import { peekHostKey } from '../../lib/guestSsh';
import { fingerprint, parseHostKey } from '../../lib/guestHostKey';
import { portAnswers } from '../../lib/network';

/**
 * Two VMs, one address: the start of a VM whose address another VM answers (two VMs given
 * one `ipconfig0`, a lease handed out twice) must not report success against the other
 * machine. The SSH wait after a start or reboot accepts only the host key the VM's own
 * guest agent reports through Proxmox, the key its install pinned, never one first seen.
 */

let h: Harness;
let first: number;
let second: number;

beforeAll(async () => {
  h = await startHarness({ SSH_WAIT_TIMEOUT: '30' });
  [first, second] = [await install('first'), await install('second')];
});

afterAll(async () => {
  await h?.stop();
});

async function install(name: string): Promise<number> {
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', name } });
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  return Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);
}

async function qm(...args: string[]): Promise<string> {
  return (await execa('qm', args, { env: { ...process.env, ...h.sandbox.envFor(h.config.mainNode) } })).stdout;
}

const ipconfig0 = async (vmid: number) => /^ipconfig0: (.*)$/m.exec(await qm('config', String(vmid)))![1];
const addressOf = (ipconfig: string) => /(?:^|,)ip=([\d.]+)\//.exec(ipconfig)![1];

test('a start whose address another VM answers fails on the host key, naming both, instead of reporting success', async () => {
  const address = addressOf(await ipconfig0(first));
  expect((await apiCall(h.api, 'POST', `/vm/${first}/stop`)).status).toBe(200);
  expect((await apiCall(h.api, 'POST', `/vm/${second}/stop`)).status).toBe(200);

  // The second VM is given the first one's address, and answers there.
  await qm('set', String(second), '--ipconfig0', await ipconfig0(first));
  await qm('start', String(second));
  await eventually(async () => expect(await portAnswers(address, h.config.vmSshPort)).toBe(true), 30_000);
  const squatter = fingerprint(parseHostKey(await peekHostKey({ host: address, port: h.config.vmSshPort }, 5000)).blob);

  const start = await requestSse(`${h.api}/vm/${first}/start`, { method: 'POST' });
  const last = start.events.at(-1)!;
  expect(last).toMatchObject({ step: 'VM start > wait for SSH', status: 'error' });
  expect(last.message).toMatch(/presented host key/);
  expect(last.message).toContain(squatter);
  expect(start.events.map((e) => e.message).join('\n')).not.toMatch(/VM started successfully/);
});
