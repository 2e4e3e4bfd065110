import { execFileSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalExecutor } from '../../lib/executor/local';
import { SshExecutor } from '../../lib/executor/ssh';
import type { CommandResult, NodeExecutor, RunOptions } from '../../lib/executor/types';
import { CliNode } from '../../lib/proxmox/cli';
import { ParameterError, ProxmoxCommandError, VmLockedError, VmStateError, VmidTakenError } from '../../lib/proxmox/errors';
import { startNodeSshd, type NodeSshd } from '../../sandbox/nodeSshd';
import { freePort } from '../../lib/network';
import { sha256Crypt } from '../../lib/proxmox/cipassword';
import { testSpawner } from '../support/spawner';

/** The password as qm receives it: its SHA-256 crypt hash, which must verify against it. */
function expectHashOf(password: string, hash: string): void {
  const m = /^\$5\$([^$]{1,16})\$[./0-9A-Za-z]{43}$/.exec(hash);
  expect(m).not.toBeNull();
  expect(sha256Crypt(password, m![1])).toBe(hash);
}

/** Answers commands from a script of canned results, and records what it was asked. */
class ScriptedExecutor implements NodeExecutor {
  readonly calls: Array<{ argv: string[]; opts: RunOptions }> = [];
  constructor(
    readonly node: string,
    private readonly answer: (argv: string[]) => Partial<CommandResult>,
  ) {}
  async run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    this.calls.push({ argv: [...argv], opts });
    const r = { stdout: '', stderr: '', exitCode: 0, ...this.answer([...argv]) };
    for (const line of r.stdout.split('\n').slice(0, -1)) opts.onLine?.(line, 'stdout');
    for (const line of r.stderr.split('\n').slice(0, -1)) opts.onLine?.(line, 'stderr');
    return r;
  }
  async close(): Promise<void> {}
}

const scripted = (answer: (argv: string[]) => Partial<CommandResult>) => {
  const exec = new ScriptedExecutor('pve1', answer);
  return { exec, pve: new CliNode(exec) };
};

describe('ProxmoxNode with a scripted node', () => {
  it('builds qm create with every option as its own argument', async () => {
    const { exec, pve } = scripted(() => ({}));
    await pve.createVm(120, {
      name: 'web-120',
      cores: 2,
      cpu: 'x86-64-v2-AES',
      scsihw: 'virtio-scsi-pci',
      memory: 2048,
      ostype: 'l26',
      agent: '1',
      net0: 'virtio,bridge=vmbr0',
      serial0: 'socket',
      numa: true,
      balloon: undefined,
      description: 'owner: wf-1\nspec: x',
    });
    expect(exec.calls[0].argv).toEqual([
      'qm', 'create', '120', '--name', 'web-120', '--cores', '2', '--cpu', 'x86-64-v2-AES', '--scsihw', 'virtio-scsi-pci',
      '--memory', '2048', '--ostype', 'l26', '--agent', '1', '--net0', 'virtio,bridge=vmbr0', '--serial0', 'socket',
      '--numa', '1', '--description', 'owner: wf-1\nspec: x',
    ]);
    expect(exec.calls[0].opts.timeoutMs).toBe(600_000);
  });

  it('throws VmidTakenError for a used VMID', async () => {
    const { pve } = scripted(() => ({ exitCode: 255, stderr: "unable to create VM 120 - VM 120 already exists on node 'pve2'\n" }));
    await expect(pve.createVm(120, { name: 'x' })).rejects.toBeInstanceOf(VmidTakenError);
  });

  it('imports a disk, streaming progress, and returns the volume ID', async () => {
    const out = "importing disk '/tmp/d.qcow2' to VM 120 ...\ntransferred 0.0 B of 2.0 GiB (0.00%)\ntransferred 2.0 GiB of 2.0 GiB (100.00%)\nunused0: successfully imported disk 'local-lvm:vm-120-disk-0'\n";
    const { exec, pve } = scripted(() => ({ stdout: out }));
    const seen: Array<[string, number | undefined]> = [];
    const volid = await pve.importDisk(120, '/tmp/d.qcow2', 'local-lvm', { onProgress: (line, p) => seen.push([line, p?.percent]) });
    expect(volid).toBe('local-lvm:vm-120-disk-0');
    expect(exec.calls[0].argv).toEqual(['qm', 'importdisk', '120', '/tmp/d.qcow2', 'local-lvm']);
    expect(exec.calls[0].opts.timeoutMs).toBeUndefined();
    expect(seen.map((s) => s[1])).toEqual([undefined, 0, 100, undefined]);
  });

  it('treats stderr from an exit-0 resize as failure, storage warnings excepted', async () => {
    const failing = scripted(() => ({ exitCode: 0, stderr: 'shrinking disks is not supported\n' }));
    const err = await failing.pve.resize(120, 'scsi0', '8G').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParameterError);
    expect(err).toMatchObject({ exitCode: 0, command: 'qm resize 120 scsi0 8G' });

    const warning = scripted(() => ({ exitCode: 0, stderr: '  WARNING: Sum of all thin volume sizes exceeds the size of thin pool\n' }));
    await expect(warning.pve.resize(120, 'scsi0', '+10G')).resolves.toBeUndefined();
    expect(warning.exec.calls[0].argv).toEqual(['qm', 'resize', '120', 'scsi0', '+10G']);
    await expect(warning.pve.resize(120, 'scsi0', '10G; reboot')).rejects.toThrow(/invalid disk size/);
  });

  it('migrates with local disks, reporting lines and the duration', async () => {
    const stdout = "2025-03-01 10:00:00 starting migration of VM 102 to node 'pve2' (10.10.10.52)\n2025-03-01 10:01:33 migration finished successfully (duration 00:01:33)\n";
    const { exec, pve } = scripted(() => ({ stdout }));
    const lines: string[] = [];
    const result = await pve.migrate(102, 'pve2', { withLocalDisks: true, onLine: (line, parsed) => lines.push(parsed.message) });
    expect(exec.calls[0].argv).toEqual(['qm', 'migrate', '102', 'pve2', '--with-local-disks', '1']);
    expect(result).toEqual({ durationSec: 93 });
    expect(lines).toEqual(["starting migration of VM 102 to node 'pve2' (10.10.10.52)", 'migration finished successfully (duration 00:01:33)']);
  });

  it('counts starting a running VM as done, and reports other state errors', async () => {
    const running = scripted(() => ({ exitCode: 255, stderr: 'VM 120 already running\n' }));
    await expect(running.pve.start(120)).resolves.toBe('already-running');
    const ok = scripted(() => ({}));
    await expect(ok.pve.start(120)).resolves.toBe('started');
    const stopped = scripted(() => ({ exitCode: 255, stderr: 'VM 120 not running\n\nVM 120 not running\n' }));
    await expect(stopped.pve.reboot(120)).rejects.toBeInstanceOf(VmStateError);
  });

  it('destroys with --purge by default; passes --skiplock', async () => {
    const { exec, pve } = scripted(() => ({}));
    await pve.destroy(120, { skiplock: true });
    await pve.stop(120, { skiplock: true });
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['qm', 'destroy', '120', '--purge', '1', '--skiplock', '1'],
      ['qm', 'stop', '120', '--skiplock', '1'],
    ]);
  });

  it('reads config, status, list, cluster state and storage', async () => {
    const { exec, pve } = scripted((argv) => {
      const key = argv.slice(0, 3).join(' ');
      if (key === 'qm config 120') return { stdout: 'cores: 2\nlock: create\nname: web-120\n' };
      if (key === 'qm status 120') return { stdout: 'status: stopped\n' };
      if (key === 'pvesh get /cluster/nextid') return { stdout: '"104"\n' };
      if (key === 'pvesh get /cluster/resources') return { stdout: '[{"id":"qemu/104","type":"qemu","vmid":104,"node":"pve2","status":"running","template":0}]\n' };
      if (key === 'pvesh get /nodes') return { stdout: '[{"node":"pve1","status":"online","type":"node","id":"node/pve1"}]\n' };
      if (key === 'pvesh get /nodes/pve2/status') return { stdout: '{"cpuinfo":{"flags":"sse2 avx2","cpus":4},"memory":{"total":1}}\n' };
      if (argv[0] === 'pvesm') return { stdout: 'local dir active 100 10 90 10.00%\n' };
      return { exitCode: 2, stderr: `unexpected ${argv.join(' ')}` };
    });
    expect(await pve.config(120)).toMatchObject({ cores: 2, lock: 'create', name: 'web-120' });
    expect(await pve.status(120)).toBe('stopped');
    expect(await pve.nextId()).toBe(104);
    expect(await pve.clusterResources('vm')).toEqual([expect.objectContaining({ vmid: 104, node: 'pve2' })]);
    expect(await pve.nodes()).toEqual([{ node: 'pve1', status: 'online' }]);
    expect((await pve.nodeStatus('pve2')).cpuinfo.flags).toEqual(['sse2', 'avx2']);
    expect(await pve.storageStatus({ content: 'images' })).toEqual([expect.objectContaining({ name: 'local', usedPercent: 10 })]);
    expect(exec.calls.map((c) => c.argv)).toContainEqual(['pvesh', 'get', '/cluster/resources', '--type', 'vm', '--output-format', 'json']);
    expect(exec.calls.map((c) => c.argv)).toContainEqual(['pvesm', 'status', '--content', 'images']);
    expect(exec.calls.every((c) => c.opts.timeoutMs === 60_000)).toBe(true);
  });

  it('throws VmLockedError (retryable) for a locked VM', async () => {
    const { pve } = scripted(() => ({ exitCode: 255, stderr: 'VM is locked (create)\n' }));
    const err = await pve.setVmOptions(120, { tags: 'debian' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VmLockedError);
    expect(err).toMatchObject({ retryable: true, lock: 'create', command: 'qm set 120 --tags debian' });
  });

  it('never puts the password or the keys in the argv; the node sees only the hash, which errors hide', async () => {
    const password = "s3cr3t 'pw' $(x)";
    // The node can only echo what it got: the hash on stdin.
    const { exec, pve } = scripted((argv) => {
      void argv;
      const hash = exec.calls[0].opts.stdin!.split('\n')[0];
      return { exitCode: 255, stderr: `bad value '${hash}'\n`, stdout: `update VM 120: -cipassword ${hash}\n` };
    });
    const err = (await pve.setVmOptions(120, { cipassword: password, sshkeys: 'ssh-ed25519 AAAA k\n', ciuser: 'debian' }).catch((e: unknown) => e)) as ProxmoxCommandError;
    const argv = exec.calls[0].argv.join(' ');
    expect(argv).not.toContain(password);
    expect(argv).not.toContain('AAAA');
    const [hash, ...keyLines] = exec.calls[0].opts.stdin!.split('\n');
    expectHashOf(password, hash);
    expect(keyLines.join('\n')).toBe('ssh-ed25519 AAAA k\n');
    expect(err).toBeInstanceOf(ProxmoxCommandError);
    expect(JSON.stringify({ ...err, message: err.message })).not.toContain('s3cr3t');
    expect(JSON.stringify({ ...err, message: err.message })).not.toContain(hash);
    expect(err.command).toBe('qm set 120 --ciuser debian --cipassword <hidden> --sshkeys <file>');
    expect(err.stderr).toBe("bad value '<hidden>'\n");
  });

  it('leaves messages whole whatever the password is: no text is substituted on its account', async () => {
    for (const password of ['error', 'p', 'SSH']) {
      const stderr = 'unexpected error in cloudinit config\nSSH public key validation error\n';
      const { pve } = scripted(() => ({ exitCode: 255, stderr }));
      const err = (await pve.setVmOptions(120, { cipassword: password, sshkeys: 'ssh-ed25519 AAAA k\n' }).catch((e: unknown) => e)) as ProxmoxCommandError;
      expect({ password, stderr: err.stderr }).toEqual({ password, stderr });
      expect(err.message).toContain('unexpected error in cloudinit config; SSH public key validation error');
    }
  });

  it('passes a kept hash on as it is', async () => {
    const hash = '$5$abcdefgh$' + 'A'.repeat(43);
    const { exec, pve } = scripted(() => ({}));
    await pve.setVmOptions(120, { cipasswordHash: hash });
    expect(exec.calls[0].opts.stdin).toBe(`${hash}\n`);
    await expect(pve.setVmOptions(120, { cipasswordHash: 'plain' })).rejects.toThrow(/crypt hash/);
  });

  it('reads the stored hash from qm cloudinit dump user (qm config shows only stars)', async () => {
    const hash = '$5$abcdefgh$' + 'B'.repeat(43);
    const dump = `#cloud-config\nhostname: web-131\nmanage_etc_hosts: true\nfqdn: web-131\nuser: debian\npassword: ${hash}\nchpasswd:\n  expire: False\n`;
    const { exec, pve } = scripted(() => ({ stdout: dump }));
    expect(await pve.ciPasswordHash(131)).toBe(hash);
    expect(exec.calls[0].argv).toEqual(['qm', 'cloudinit', 'dump', '131', 'user']);
    const none = scripted(() => ({ stdout: '#cloud-config\nhostname: x\n' }));
    expect(await none.pve.ciPasswordHash(131)).toBeUndefined();
  });

  it('refuses a password with a line break rather than splitting it', async () => {
    const { pve } = scripted(() => ({}));
    await expect(pve.setVmOptions(120, { cipassword: 'a\nb' })).rejects.toThrow(/line break/);
  });
});

/**
 * setVmOptions's secret path for real: a fake `qm` records its argv, and the mode and content of
 * the --sshkeys file, through both executors.
 */
describe('ProxmoxNode.setVmOptions secrets through real executors', () => {
  let tmp: string;
  let sshd: NodeSshd;
  let ssh: SshExecutor;
  let binDir: string;
  const record = () => path.join(tmp, 'qm-record.json');

  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'qr-proxmox-'));
    binDir = path.join(tmp, 'bin');
    await fs.mkdir(binDir);
    await fs.writeFile(
      path.join(binDir, 'qm'),
      `#!${process.execPath}
const fs = require('fs');
const args = process.argv.slice(2);
const i = args.indexOf('--sshkeys');
const file = i >= 0 ? args[i + 1] : undefined;
fs.writeFileSync(${JSON.stringify(record())}, JSON.stringify({
  args, file,
  keys: file ? fs.readFileSync(file, 'utf8') : undefined,
  mode: file ? (fs.statSync(file).mode & 0o777).toString(8) : undefined,
}));
if (args.includes('fail')) { console.error('400 Parameter verification failed.'); process.exit(2); }
console.log('update VM ' + args[1] + ': ...');
`,
      { mode: 0o755 },
    );
    const keyPath = path.join(tmp, 'id_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyPath]);
    const port = await freePort();
    sshd = await startNodeSshd({
      node: 'pve2',
      host: '127.0.0.1',
      port,
      stateDir: path.join(tmp, 'sshd'),
      authorizedKeys: [await fs.readFile(`${keyPath}.pub`, 'utf8')],
      env: { PATH: `${binDir}:/usr/bin:/bin` },
    });
    ssh = new SshExecutor({ node: 'pve2', host: '127.0.0.1', port, privateKeyPath: keyPath, knownHostsDir: path.join(tmp, 'known') });
  });

  afterAll(async () => {
    await ssh?.close();
    await sshd?.stop();
    await fs.rm(tmp, { recursive: true, force: true });
  });

  const executors = (): Array<[string, NodeExecutor]> => [
    ['local', new LocalExecutor('pve1', { spawner: testSpawner(), env: { PATH: `${binDir}:${process.env.PATH}` } })],
    ['ssh', ssh],
  ];

  it.each(['local', 'ssh'])('%s: keys arrive as a 0600 file that is gone afterwards; the password as one argument, hashed', async (kind) => {
    const exec = executors().find(([k]) => k === kind)![1];
    const keys = "ssh-ed25519 AAAAC3Nza root@pve1\nssh-rsa AAAAB3 it's \"me\" $(touch /tmp/qr-canary-keys)\n";
    const password = `p@ss 'w"ord' $(touch /tmp/qr-canary-pw) \`id\` ; x`;
    await new CliNode(exec).setVmOptions(120, { sshkeys: keys, cipassword: password, ciupgrade: 0, tags: 'debian' });
    const r = JSON.parse(await fs.readFile(record(), 'utf8'));
    expect(r.args).toEqual(['set', '120', '--ciupgrade', '0', '--tags', 'debian', '--cipassword', expect.any(String), '--sshkeys', r.file]);
    expectHashOf(password, r.args[7]);
    expect(r.keys).toBe(keys);
    expect(r.mode).toBe('600');
    expect(existsSync(r.file)).toBe(false);
    expect(existsSync('/tmp/qr-canary-keys')).toBe(false);
    expect(existsSync('/tmp/qr-canary-pw')).toBe(false);
  });

  it.each(['local', 'ssh'])('%s: a failing qm set keeps its exit code and still removes the file', async (kind) => {
    const exec = executors().find(([k]) => k === kind)![1];
    const err = await new CliNode(exec).setVmOptions(120, { sshkeys: 'ssh-ed25519 A k\n', name: 'fail' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParameterError);
    expect(err).toMatchObject({ exitCode: 2 });
    const r = JSON.parse(await fs.readFile(record(), 'utf8'));
    expect(existsSync(r.file)).toBe(false);
  });
});
