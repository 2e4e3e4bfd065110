import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureSandboxTools, QEMU_GUEST_TOOLS, SANDBOX_TOOLS } from '../../requirements';
import { SandboxSetupError } from '../../setupError';

/**
 * The tools check on made-up machines: directories holding some of the programs, and an
 * apt-get stand-in that "installs" by putting the missing programs in place.
 */

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-tools-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function machine(name: string, commands: string[]): string {
  const bin = path.join(dir, name);
  fs.mkdirSync(bin, { recursive: true });
  for (const c of commands) fs.writeFileSync(path.join(bin, c), '#!/bin/sh\n', { mode: 0o755 });
  return bin;
}

const ALL = SANDBOX_TOOLS.map((t) => t.command);
const without = (...gone: string[]) => ALL.filter((c) => !gone.includes(c));

test('finds every tool and says nothing when all are there', async () => {
  const bin = machine('bin', ALL);
  const log: string[] = [];
  const tools = await ensureSandboxTools({ toolsPath: bin, log: (l) => log.push(l) });
  expect(tools.sshd).toBe(path.join(bin, 'sshd'));
  expect(tools.bwrap).toBe(path.join(bin, 'bwrap'));
  expect(log).toEqual([]);
});

test('a file that is not executable does not count', async () => {
  const bin = machine('bin', without('sshd'));
  fs.writeFileSync(path.join(bin, 'sshd'), '', { mode: 0o644 });
  await expect(ensureSandboxTools({ toolsPath: bin })).rejects.toThrow(/needs sshd/);
});

test('with SANDBOX_TOOLS_PATH set, a missing tool is one message naming package, command and setting', async () => {
  const bin = machine('bin', without('sshd', 'bwrap'));
  const install = jest.fn();
  const err = await ensureSandboxTools({ toolsPath: bin, isRoot: true, install }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(SandboxSetupError);
  const msg = (err as Error).message;
  expect(msg).not.toContain('\n');
  expect(msg).toContain('sandbox mode needs sshd, bwrap (Debian packages openssh-server bubblewrap)');
  expect(msg).toContain('`apt-get install -y openssh-server bubblewrap`');
  expect(msg).toContain(`SANDBOX_TOOLS_PATH=${bin}`);
  expect(install).not.toHaveBeenCalled();
});

test('root without apt-get: the message names the packages, nothing is tried', async () => {
  const bin = machine('bin', without('setpriv'));
  const err = await ensureSandboxTools({ path: bin, systemDirs: [], isRoot: true }).catch((e: unknown) => e);
  expect((err as Error).message).toBe(
    "sandbox mode needs setpriv (Debian package util-linux): install it with `apt-get install -y util-linux`, then start again.",
  );
});

test('not root: the message tells to install with sudo, and nothing is installed', async () => {
  const system = machine('usr-bin', [...without('sshd'), 'apt-get']);
  const install = jest.fn();
  const err = await ensureSandboxTools({ path: system, systemDirs: [], isRoot: false, install }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(SandboxSetupError);
  expect((err as Error).message).toContain('`sudo apt-get install -y openssh-server`');
  expect(install).not.toHaveBeenCalled();
});

test('as root with apt-get: installs the missing packages, says so in one line, then finds them', async () => {
  const bin = machine('bin', without('sshd', 'ssh-keygen', 'bwrap'));
  const aptBin = machine('apt', ['apt-get']);
  const log: string[] = [];
  const calls: Array<{ aptGet: string; packages: string[] }> = [];
  const tools = await ensureSandboxTools({
    path: `${bin}:${aptBin}`,
    systemDirs: [],
    isRoot: true,
    log: (l) => log.push(l),
    install: async (aptGet, packages) => {
      calls.push({ aptGet, packages });
      for (const c of ['sshd', 'ssh-keygen', 'bwrap']) fs.writeFileSync(path.join(bin, c), '#!/bin/sh\n', { mode: 0o755 });
    },
  });
  expect(calls).toEqual([{ aptGet: path.join(aptBin, 'apt-get'), packages: ['openssh-server', 'openssh-client', 'bubblewrap'] }]);
  expect(log).toEqual(['Installing openssh-server openssh-client bubblewrap with apt-get: sandbox mode needs sshd, ssh-keygen, bwrap.']);
  expect(tools.sshd).toBe(path.join(bin, 'sshd'));
});

test('a failed apt-get is a start-up error with its last line', async () => {
  const bin = machine('bin', without('bwrap'));
  const err = await ensureSandboxTools({
    path: `${bin}:${machine('apt', ['apt-get'])}`,
    systemDirs: [],
    isRoot: true,
    log: () => {},
    install: async () => {
      throw Object.assign(new Error('exit 100'), { stderr: 'E: Unable to locate package bubblewrap\n' });
    },
  }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(SandboxSetupError);
  expect((err as Error).message).toContain('`apt-get install` failed (E: Unable to locate package bubblewrap)');
});

test('the real apt-get call: install, and on failure update the package lists and install again', async () => {
  const bin = machine('bin', without('bwrap'));
  const apt = machine('apt', []);
  const calls = path.join(dir, 'apt-calls');
  // A fresh container's apt-get: install fails until `update` has fetched the lists.
  fs.writeFileSync(
    path.join(apt, 'apt-get'),
    `#!/bin/bash
echo "$DEBIAN_FRONTEND $*" >> '${calls}'
if [[ $1 == update ]]; then touch '${dir}/lists'; exit 0; fi
if [[ ! -e '${dir}/lists' ]]; then echo 'E: Unable to locate package bubblewrap' >&2; exit 100; fi
printf '#!/bin/sh\\n' > '${bin}/bwrap'; chmod 755 '${bin}/bwrap'
`,
    { mode: 0o755 },
  );
  const tools = await ensureSandboxTools({ path: `${bin}:${apt}`, systemDirs: [], isRoot: true, log: () => {} });
  expect(tools.bwrap).toBe(path.join(bin, 'bwrap'));
  expect(fs.readFileSync(calls, 'utf8').trim().split('\n')).toEqual([
    'noninteractive install -y -qq --no-install-recommends bubblewrap',
    'noninteractive update -qq',
    'noninteractive install -y -qq --no-install-recommends bubblewrap',
  ]);
});

test('a data file (the OVMF firmware of real guests) counts by its path, whatever the search directories', async () => {
  const bin = machine('bin', ALL);
  const firmware = path.join(dir, 'OVMF', 'OVMF_CODE_4M.fd');
  const tools = [...SANDBOX_TOOLS, { command: firmware, package: 'ovmf', use: 'the UEFI firmware of guests with bios: ovmf' }];
  const err = await ensureSandboxTools({ path: bin, systemDirs: [], isRoot: false, tools }).catch((e: unknown) => e);
  expect((err as Error).message).toBe(`sandbox mode needs ${firmware} (Debian package ovmf): install it with \`sudo apt-get install -y ovmf\`, then start again.`);
  fs.mkdirSync(path.dirname(firmware));
  fs.writeFileSync(firmware, '');
  expect((await ensureSandboxTools({ path: bin, systemDirs: [], isRoot: false, tools }))[firmware]).toBe(firmware);
});

test('real guests need Debian\'s ovmf package', () => {
  expect(QEMU_GUEST_TOOLS).toContainEqual(expect.objectContaining({ command: '/usr/share/OVMF/OVMF_CODE_4M.fd', package: 'ovmf' }));
});
