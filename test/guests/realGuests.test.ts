import type { ResultPromise } from 'execa';
import { connectGuest, execOnGuest } from '../../lib/guestSsh';
import { userKeyPair } from '../support/guest';
import { startChildWorker } from '../support/childWorker';
import { startHarness, type Harness } from '../support/harness';
import { fingerprint, parseHostKey } from '../../lib/guestHostKey';
import { requestSse, type SseResponse } from '../support/sse';
import { apiCall } from '../support/api';
import { waitFor } from '../../sandbox/testkit';

/**
 * Real guests (SANDBOX_GUESTS=qemu): the service installs VMs that are real QEMU
 * machines booting real Debian cloud images built on this machine, with qemu-server's
 * cloud-init drive, real cloud-init, sshd and systemd. Installs run side by side; the
 * figures of a run are in docs/performance.md (`npm run bench`).
 */

let h: Harness;
const key = userKeyPair('user@laptop');
const MINUTES = 60_000;
const workers: ResultPromise[] = [];

beforeAll(async () => {
  // The worker runs in a process of its own, so that one test can kill it as the OOM killer would.
  // `local` takes snippets, as an operator enables them for userData (SNIPPETS_STORAGE).
  h = await startHarness(
    { SANDBOX_GUESTS: 'qemu', SSH_WAIT_TIMEOUT: '900', SANDBOX_BOOT_DELAY_MS: '0', INIT_PACKAGES: 'tree' },
    { worker: false, storageContent: { local: ['backup', 'import', 'iso', 'snippets', 'vztmpl'] } },
  );
  await startWorker();
}, 30 * MINUTES);

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await h?.stop();
});

async function startWorker(): Promise<{ child: ResultPromise }> {
  const started = await startChildWorker(h.config);
  workers.push(started.child);
  return started;
}

const until = (what: string, check: () => Promise<boolean> | boolean, timeoutMs: number) => waitFor(what, check, timeoutMs, 1000);

/** Runs a command in a guest; its stdout, or a rejection with the exit code and stderr. */
async function inGuest(ip: string, user: string, command: string, privateKey: Buffer = key.privateKey): Promise<string> {
  const conn = await connectGuest({ host: ip, port: h.config.vmSshPort, username: user, privateKey }, 20_000);
  try {
    const out: string[] = [];
    const err: string[] = [];
    const code = await execOnGuest(conn, command, { onLine: (l, s) => (s === 'stdout' ? out : err).push(l) });
    if (code !== 0) throw new Error(`${command} exited ${code}: ${err.join('\n')}`);
    return out.join('\n');
  } finally {
    conn.end();
  }
}

interface Installed {
  res: SseResponse;
  vmid: number;
  ip: string;
  user: string;
}

async function install(body: Record<string, unknown>, onEvent?: (e: { step: string; message: string }) => void): Promise<Installed> {
  const res = await requestSse(`${h.api}/vm/install`, { body: { ram: 1024, disk: '8G', pubkey: key.publicKey, ...body }, timeoutMs: 30 * MINUTES, onEvent });
  // A refused body (400) is no event stream: say what the API said instead of "no final events".
  if (res.status !== 200) throw new Error(`install answered ${res.status}: ${res.body}`);
  const errors = res.events.filter((e) => e.status === 'error');
  if (errors.length) throw new Error(`install failed: ${errors.map((e) => `${e.step}: ${e.message}`).join('; ')}`);
  const last = res.events.slice(-4);
  expect(last.map((e) => e.step)).toEqual(Array(4).fill('VM initialization > finalizing'));
  expect(last[0].message).toMatch(/^\[\+\] VM installation completed in \d+\.\d{2}s$/);
  const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(last[1].message)?.[1]);
  const ip = /^\[\*\] IP: (\S+)$/.exec(last[2].message)?.[1] ?? '';
  const user = /^\[\*\] User: (\S+)$/.exec(last[3].message)?.[1] ?? '';
  // A DHCP guest's SSH is forwarded from the sandbox DHCP stand-in's lease, outside GATEWAY's /24.
  if (body.ip === 'dhcp') expect(ip).toMatch(/^127\.0\.3\.\d+$/);
  else expect(ip).toBe(`127.0.0.${vmid}`);
  return { res, vmid, ip, user };
}

/** What the Debian init script promises, read inside the guest. */
async function expectInitScriptApplied(vm: Installed): Promise<void> {
  const facts = await inGuest(
    vm.ip,
    vm.user,
    [
      'ps -p 1 -o comm=',
      "awk 'NR > 1 { print $1 }' /proc/swaps",
      'timedatectl show -p Timezone --value',
      '. /etc/default/locale; echo $LANG',
      'systemctl is-active qemu-guest-agent',
      'cat /var/lib/qemurun/init-done',
      // INIT_PACKAGES: fetched from Debian's archive through the sandbox's proxy.
      "dpkg-query -W -f '${Status}' tree",
    ].join('; '),
  );
  const [init, swap, tz, lang, agent, marker, tree] = facts.split('\n');
  expect({ init, swap, tz, lang, agent, tree }).toEqual({
    init: 'systemd',
    swap: '/swapfile',
    tz: 'UTC',
    lang: 'en_US.UTF-8',
    agent: 'active',
    tree: 'install ok installed',
  });
  expect(marker).toMatch(/\S/);
}

/** The init script's first line (init-scripts/lib/common.sh, qr_main). */
const INIT_SCRIPT_HEADER = /^\[\*\] QemuRun init script \S+ for debian/;

const bootId = (vm: Installed) => inGuest(vm.ip, vm.user, 'cat /proc/sys/kernel/random/boot_id');

// Two Debian 12 installs carry every setting the suite checks on that version, side by side
// (each real install takes minutes of TCG): `custom` is the defaults (i440fx, SeaBIOS, a
// static address) with user alice and userData; `efi` is the default user on q35 + OVMF
// with an extra disk and ip "dhcp". The tests after the first check one setting each.

/** userData whose write_files replaces the image's deb822 sources (deb.debian.org, which a
 * sandbox guest cannot reach): write_files runs in cloud-init's init stage, before the final
 * stage installs packages, so apt goes through the sandbox's archive proxy, as the init
 * script's does later. */
function realUserData(): string {
  const sources = ['Types: deb', 'URIs: http://10.0.2.100/debian', 'Suites: bookworm bookworm-updates', 'Components: main', 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg', '', 'Types: deb', 'URIs: http://10.0.2.100/debian-security', 'Suites: bookworm-security', 'Components: main', 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'];
  return [
    '#cloud-config',
    'packages: [hello]',
    'write_files:',
    '  - path: /etc/apt/sources.list.d/debian.sources',
    '    content: |',
    ...sources.map((l) => (l ? `      ${l}` : '')),
    '  - path: /etc/qemurun-note',
    '    content: "written by cloud-init\\n"',
    "    permissions: '0640'",
    'runcmd:',
    '  - echo ran > /var/tmp/runcmd-done',
    '',
  ].join('\n');
}

let custom: Installed;
let efi: Installed;

test(
  'Debian 12 as user alice with userData, and with the default user on q35 + OVMF + a data disk + DHCP, side by side: real systemd, the init script applied, both accounts take the key',
  async () => {
    [custom, efi] = await Promise.all([
      install({ os: 'debian', version: '12', name: 'real-custom', user: 'alice', userData: realUserData() }),
      install({ os: 'debian', version: '12', name: 'real-efi-dhcp', bios: 'ovmf', machine: 'q35', disks: [{ size: '1G' }], ip: 'dhcp' }),
    ]);
    expect(custom.user).toBe('alice');
    expect(efi.user).toBe('debian');
    // The init script still ran after cloud-init, on the account the merged user-data made.
    await expectInitScriptApplied(custom);
    await expectInitScriptApplied(efi);
    // The host key was made on the guest's first boot, not baked into the image.
    const hostKeys = await Promise.all([custom, efi].map((vm) => inGuest(vm.ip, vm.user, 'cat /etc/ssh/ssh_host_ed25519_key.pub')));
    expect(hostKeys[0]).not.toBe(hostKeys[1]);
    // Each install pinned that key, read through the real guest agent.
    [custom, efi].forEach((vm, i) => {
      const pinned = `[*] host key ${fingerprint(parseHostKey(hostKeys[i]).blob)} (reported by the guest agent)`;
      expect(vm.res.events.map((e) => e.message)).toContain(pinned);
    });
    // cloud-init renamed the default account to alice; the init script made `debian` beside it.
    expect(await inGuest(custom.ip, 'alice', 'id -un; sudo -n id -un')).toBe('alice\nroot');
    expect(await inGuest(custom.ip, 'debian', 'id -un; sudo -n id -un')).toBe('debian\nroot');
    // The main node's key works for both too.
    expect(await inGuest(custom.ip, 'debian', 'true', h.key.privateKey)).toBe('');
    await expect(inGuest(custom.ip, 'debian', 'true', userKeyPair().privateKey)).rejects.toThrow(/authentication/);
    // The guest said whether it needs a reboot (a newer kernel than the image's from the
    // upgrade, or none), and the install did as it said: one boot, or a real second one.
    for (const vm of [custom, efi]) {
      const said = vm.res.events.filter((e) => e.step === 'VM initialization > reboot' && /^\[\*\] (rebooting:|no reboot needed:)/.test(e.message)).map((e) => e.message);
      expect(said).toEqual([expect.stringMatching(/^\[\*\] (rebooting: kernel \S+ is installed, \S+ is running|no reboot needed: no newer kernel than the running \S+-amd64, no \/run\/reboot-required)$/)]);
      // sudo: the journal of other boots is the system's, and a custom account is in no group that reads it.
      const boots = await inGuest(vm.ip, vm.user, "sudo -n journalctl --list-boots --no-pager | grep -cE '^ *-?[0-9]+ '");
      expect(Number(boots)).toBe(said[0].startsWith('[*] rebooting') ? 2 : 1);
    }
  },
  40 * MINUTES,
);

test('userData on a real guest: cloud-init itself installed its packages, wrote its files and ran its commands', async () => {
  const facts = await inGuest(custom.ip, custom.user, "dpkg-query -W -f '${Status}\\n' hello; sudo -n cat /etc/qemurun-note; stat -c %a /etc/qemurun-note; cat /var/tmp/runcmd-done");
  expect(facts.split('\n')).toEqual(['install ok installed', 'written by cloud-init', '640', 'ran']);
});

test('bios ovmf, machine q35 and an extra 1 GiB disk: the guest boots UEFI on a Q35 machine and sees the disk', async () => {
  const facts = await inGuest(
    efi.ip,
    efi.user,
    [
      'test -d /sys/firmware/efi && echo uefi || echo bios',
      'cat /sys/class/dmi/id/product_name',
      'uname -r',
      'test -d /sys/module/ahci && echo ahci || echo no-ahci',
      'lsblk -bdnro NAME,SIZE,TYPE,HCTL',
    ].join('; '),
  );
  const [firmware, product, kernel, ahci, ...blocks] = facts.split('\n');
  expect(firmware).toBe('uefi');
  // QEMU's q35 machine: "Standard PC (Q35 + ICH9, 2009)"; i440fx says "Standard PC (i440FX + PIIX, 1996)".
  expect(product).toMatch(/Q35/);
  // The image is Debian's *generic* one, as its name says: the full kernel, which drives q35's
  // ICH9 AHCI controller (the genericcloud kernel of Debian 12 has no AHCI driver).
  expect([kernel, ahci]).toEqual([expect.stringMatching(/^\d[\w.+~-]*-amd64$/), 'ahci']);
  expect(kernel).not.toMatch(/cloud/);
  // scsi1 is LUN 1 on the VM's virtio-scsi controller, empty, and exactly the size asked for.
  const extra = blocks.map((l) => l.split(' ')).find(([, , , hctl]) => /:0:0:1$/.test(hctl ?? ''));
  expect(extra).toEqual([expect.stringMatching(/^sd[a-z]$/), String(1024 ** 3), 'disk', expect.stringMatching(/:0:0:1$/)]);
});

test('ip "dhcp": the real guest takes its lease, the install learns the address from the real guest agent', async () => {
  expect(efi.res.events.map((e) => e.message)).toContain(`[*] address ${efi.ip} (from the guest agent)`);
  // Inside, the NIC holds slirp's DHCP lease: the agent reported the address forwarded to it instead.
  const addr = await inGuest(efi.ip, efi.user, "ip -4 -o addr show scope global | awk '{ print $4 }'");
  expect(addr.split('\n')).toEqual(['10.0.2.15/24']);
  expect(await inGuest(efi.ip, efi.user, 'systemctl is-active qemu-guest-agent')).toBe('active');
});

// The Debian 12 template is built beside the power operations on `efi`: two real guests
// share the machine's cores, as the installs do, instead of one test leaving a core idle.
// The rebuild of `custom` after it then clones that template (issue 25's fast path).
let templateBuild: Promise<SseResponse> | undefined;
let customHostKey: string;

test(
  'stop, start and reboot through the API boot the real UEFI guest again, at its DHCP address',
  async () => {
    customHostKey = await inGuest(custom.ip, 'alice', 'cat /etc/ssh/ssh_host_ed25519_key.pub');
    const started = await apiCall(h.api, 'POST', '/templates', { os: 'debian', version: '12' });
    expect(started.status).toBe(202);
    templateBuild = requestSse(`${h.api}${String((started.json as { events: string }).events).replace(/^\/api/, '')}`, { timeoutMs: 30 * MINUTES });
    templateBuild.catch(() => undefined); // awaited, and reported, by the rebuild test
    const vm = efi;
    const before = await bootId(vm);
    const reboot = await requestSse(`${h.api}/vm/${vm.vmid}/reboot`, { body: {}, timeoutMs: 15 * MINUTES });
    expect(reboot.events.filter((e) => e.status === 'error')).toEqual([]);
    const afterReboot = await bootId(vm);
    expect(afterReboot).not.toBe(before);

    expect(await apiCall(h.api, 'POST', `/vm/${vm.vmid}/stop`, {})).toMatchObject({ status: 200 });
    expect((await apiCall(h.api, 'GET', `/vm/${vm.vmid}/status`)).json ?? '').toBeDefined();
    const start = await requestSse(`${h.api}/vm/${vm.vmid}/start`, { body: {}, timeoutMs: 15 * MINUTES });
    expect(start.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(await bootId(vm)).not.toBe(afterReboot);
    // The swap file and the settings survive reboots: they are in the guest's own files.
    await expectInitScriptApplied(vm);
  },
  30 * MINUTES,
);

test(
  'a real Debian 12 template is built (shared init script, cleaned, qm template), and a rebuild clones it: a new real guest from the recorded spec, its per-VM settings applied',
  async () => {
    expect(templateBuild).toBeDefined();
    const built = await templateBuild!;
    expect(built.events.filter((e) => e.status === 'error')).toEqual([]);
    expect(built.events.at(-1)!.message).toMatch(/^\[\+\] template tpl-debian-12-\d+ \(VMID \d+\) built in /);
    const res = await requestSse(`${h.api}/vm/${custom.vmid}/rebuild`, { body: {}, timeoutMs: 30 * MINUTES });
    expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
    // The fast path ran: a linked clone, no image, no upgrade, no reboot.
    expect(res.events.some((e) => /installing as a linked clone of template tpl-debian-12-/.test(e.message))).toBe(true);
    expect(res.events.some((e) => e.step === 'OS preparation > download' || e.step === 'VM initialization > reboot')).toBe(false);
    expect(res.events.at(-4)!.message).toMatch(/^\[\+\] VM rebuild completed/);
    const vmid = Number(/^\[\*\] VMID: (\d+)$/.exec(res.events.at(-3)!.message)?.[1]);
    const rebuilt: Installed = { res, vmid, ip: `127.0.0.${vmid}`, user: 'alice' };
    await expectInitScriptApplied(rebuilt);
    expect(await inGuest(rebuilt.ip, 'alice', 'cat /etc/ssh/ssh_host_ed25519_key.pub')).not.toBe(customHostKey);
    expect(await inGuest(rebuilt.ip, 'debian', 'id -un')).toBe('debian');
    // grub-pc's install device is the one the template recorded; the clone's first boot
    // did not probe for it again (grub-dpkg is off in clones, init-scripts/lib/common.sh).
    expect(await inGuest(rebuilt.ip, 'alice', 'sudo debconf-show grub-pc')).toMatch(/grub-pc\/install_devices: \/dev\/\S+/);
    expect(await inGuest(rebuilt.ip, 'alice', "sudo grep -c \"Running command \\['grub-probe'\" /var/log/cloud-init.log || true")).toBe('0');
    // Stop and destroy answer for a VM whose first install had a userData snippet.
    expect((await apiCall(h.api, 'POST', `/vm/${vmid}/stop`)).status).toBe(200);
    expect((await apiCall(h.api, 'POST', `/vm/${vmid}/destroy`)).status).toBe(200);
  },
  40 * MINUTES,
);

test(
  'Debian 11 and 13 install side by side, and finish although their worker is killed during an init script',
  async () => {
    const step = new Map<string, string>();
    // Versions whose init script has printed its first line: the script runs in the guest.
    const scriptStarted = new Set<string>();
    const installs = Promise.all(
      (['11', '13'] as const).map((version) =>
        install({ os: 'debian', version, name: `real-debian${version}` }, (e) => {
          step.set(version, e.step);
          if (INIT_SCRIPT_HEADER.test(e.message)) scriptStarted.add(version);
        }),
      ),
    );
    const inScript = () =>
      [...step].filter(([v, s]) => s === 'VM initialization > init script' && scriptStarted.has(v)).map(([v]) => v);
    await Promise.race([
      until('an init script to run', () => inScript().length > 0, 20 * MINUTES),
      installs.then(() => {
        throw new Error('both installs ended before the worker could be killed');
      }),
    ]);
    // Mid-script: the SSH session dies with the worker, and the next worker's retry runs
    // the script again on the same guest (it is safe to run twice). Waiting for the
    // script's own first line, not for the step, makes sure the first attempt really ran:
    // the step begins before the SSH handshake, which a busy guest may take long to answer.
    await new Promise((r) => setTimeout(r, 5_000));
    const interrupted = inScript();
    const killed = workers.at(-1)!;
    killed.kill('SIGKILL');
    await killed;
    await startWorker();
    const vms = await installs;
    expect(interrupted.length).toBeGreaterThan(0);
    for (const [i, version] of (['11', '13'] as const).entries()) {
      const vm = vms[i];
      expect(await inGuest(vm.ip, vm.user, '. /etc/os-release; echo $VERSION_ID')).toBe(version);
      await expectInitScriptApplied(vm);
      if (!interrupted.includes(version)) continue;
      const runs = vm.res.events.filter((e) => INIT_SCRIPT_HEADER.test(e.message));
      expect(runs.length).toBeGreaterThanOrEqual(2);
    }
  },
  40 * MINUTES,
);
