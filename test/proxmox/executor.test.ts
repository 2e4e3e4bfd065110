import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalExecutor } from '../../lib/executor/local';
import { SshExecutor } from '../../lib/executor/ssh';
import { shellCommand, shellQuote } from '../../lib/executor/quote';
import { ExecutorTimeoutError, ExecutorUnreachableError, type NodeExecutor } from '../../lib/executor/types';
import { startNodeSshd, type NodeSshd } from '../../sandbox/nodeSshd';
import { freePort } from '../../lib/network';
import { testSpawner } from '../support/spawner';

/** Prints its arguments as a JSON array: shows exactly how argv arrived. */
const PRINT_ARGV = ['node', '-e', 'console.log(JSON.stringify(process.argv.slice(1)))', '--'];

let tmp: string;
let keyPath: string;
let sshd: NodeSshd;
let sshdOptions: Parameters<typeof startNodeSshd>[0];
const executors: NodeExecutor[] = [];

function sshExecutor(extra: Partial<ConstructorParameters<typeof SshExecutor>[0]> = {}): SshExecutor {
  const e = new SshExecutor({
    node: 'pve2',
    host: '127.0.0.1',
    port: sshdOptions.port,
    privateKeyPath: keyPath,
    knownHostsDir: path.join(tmp, 'known'),
    ...extra,
  });
  executors.push(e);
  return e;
}

async function acceptedLogins(): Promise<number> {
  const log = await fs.readFile(path.join(sshdOptions.stateDir, 'sshd.log'), 'utf8');
  return log.split('\n').filter((l) => l.includes('Accepted publickey')).length;
}

beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'qr-executor-'));
  keyPath = path.join(tmp, 'id_ed25519');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'qemurun-test', '-f', keyPath]);
  sshdOptions = {
    node: 'pve2',
    host: '127.0.0.1',
    port: await freePort(),
    stateDir: path.join(tmp, 'sshd'),
    authorizedKeys: [await fs.readFile(`${keyPath}.pub`, 'utf8')],
    env: {
      PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
      PVE_SANDBOX_NODE: 'pve2',
    },
  };
  sshd = await startNodeSshd(sshdOptions);
});

afterAll(async () => {
  await Promise.all(executors.map((e) => e.close()));
  await sshd?.stop();
  await fs.rm(tmp, { recursive: true, force: true });
});

describe('shellQuote', () => {
  it('wraps in single quotes and splices a quote as \\\'', () => {
    expect(shellQuote('')).toBe("''");
    expect(shellQuote("it's")).toBe("'it'\\''s'");
    expect(shellCommand(['qm', 'set', '100'])).toBe("'qm' 'set' '100'");
  });
  it('refuses a NUL byte, which no argv element can carry', () => {
    expect(() => shellQuote('a\0b')).toThrow(/NUL/);
  });
});

describe.each([
  ['local', () => new LocalExecutor('pve1', { spawner: testSpawner() })],
  ['ssh', () => sshExecutor()],
])('%s executor', (_kind, make: () => NodeExecutor) => {
  let exec: NodeExecutor;
  beforeAll(() => {
    exec = make();
  });

  it('delivers every hostile argument as one literal argument (THE QUOTING TEST)', async () => {
    const canary = path.join(os.tmpdir(), `qr-canary-${process.pid}-${_kind}-${Date.now()}`);
    const args = [
      `$(touch ${canary}-subst)`,
      `\`touch ${canary}-backtick\``,
      ';',
      `; touch ${canary}-semicolon`,
      '&&',
      `&& touch ${canary}-and`,
      `| touch ${canary}-pipe`,
      `\ntouch ${canary}-newline\n`,
      "'",
      `'; touch ${canary}-quote; '`,
      '"',
      `"$(touch ${canary}-dq)"`,
      "it's \"quoted\"",
      '--option',
      '--sshkeys=/etc/shadow',
      '-',
      '',
      ' ',
      'two  spaces\tand tab',
      '*',
      '~',
      '$HOME',
      '${PATH}',
      '\\',
      '!',
      '#comment',
      '名前 ✓',
      'line1\nline2',
      '\r\n',
    ];
    const result = await exec.run([...PRINT_ARGV, ...args]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual(args);
    for (const suffix of ['subst', 'backtick', 'semicolon', 'and', 'pipe', 'newline', 'quote', 'dq']) {
      expect(existsSync(`${canary}-${suffix}`)).toBe(false);
    }
  });

  it('streams each stdout and stderr line as it arrives', async () => {
    const seen: Array<{ line: string; stream: string; at: number }> = [];
    const start = Date.now();
    const result = await exec.run(['sh', '-c', 'echo one; sleep 0.4; echo two >&2; sleep 0.4; printf "three\\r\\nfour"'], {
      onLine: (line, stream) => seen.push({ line, stream, at: Date.now() - start }),
    });
    expect(seen.map(({ line, stream }) => [stream, line])).toEqual([
      ['stdout', 'one'],
      ['stderr', 'two'],
      ['stdout', 'three'],
      ['stdout', 'four'],
    ]);
    // 'one' arrived while the command was still running, not at its end.
    expect(seen[0].at).toBeLessThan(seen[2].at - 500);
    expect(result).toEqual({ stdout: 'one\nthree\r\nfour', stderr: 'two\n', exitCode: 0 });
  });

  it('writes stdin and closes it', async () => {
    const input = `ssh-ed25519 AAAA it's "me" 名前\n${'x'.repeat(300_000)}\nlast`;
    const result = await exec.run(['cat'], { stdin: input });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe(input);
  });

  it('gives a command without stdin an immediate EOF', async () => {
    const result = await exec.run(['cat'], { timeoutMs: 10_000 });
    expect(result).toEqual({ stdout: '', stderr: '', exitCode: 0 });
  });

  it('returns a non-zero exit with its output instead of throwing', async () => {
    const result = await exec.run(['sh', '-c', 'echo out; echo "VM is locked (create)" >&2; exit 7']);
    expect(result).toEqual({ stdout: 'out\n', stderr: 'VM is locked (create)\n', exitCode: 7 });
  });

  it('reports a missing program as exit 127', async () => {
    const result = await exec.run(['qr-no-such-program']);
    expect(result.exitCode).toBe(127);
    expect(result.stderr).toMatch(/not found/);
  });

  it('rejects with the abort reason when the signal aborts, and the command dies', async () => {
    const marker = path.join(tmp, `survived-abort-${_kind}`);
    const ac = new AbortController();
    const start = Date.now();
    setTimeout(() => ac.abort(), 300);
    await expect(exec.run(['sh', '-c', `sleep 1; touch ${marker}`], { signal: ac.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(Date.now() - start).toBeLessThan(1_000);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(existsSync(marker)).toBe(false);
  });

  it('refuses to start when the signal is already aborted', async () => {
    await expect(exec.run(['true'], { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('kills a command that outlives timeoutMs', async () => {
    const start = Date.now();
    await expect(exec.run(['sleep', '30'], { timeoutMs: 300 })).rejects.toBeInstanceOf(ExecutorTimeoutError);
    expect(Date.now() - start).toBeLessThan(5_000);
    // The executor is still usable afterwards.
    expect((await exec.run(['true'])).exitCode).toBe(0);
  });
});

describe('LocalExecutor', () => {
  it('merges its env option into the child environment', async () => {
    const exec = new LocalExecutor('pve1', { spawner: testSpawner(), env: { PVE_SANDBOX_NODE: 'pve1' } });
    const result = await exec.run(['sh', '-c', 'echo "$PVE_SANDBOX_NODE $HOME"']);
    expect(result.stdout).toBe(`pve1 ${process.env.HOME}\n`);
  });

  it('starts commands from the spawner process, not by forking this one', async () => {
    const exec = new LocalExecutor('pve1', { spawner: testSpawner() });
    const parent = Number((await exec.run(['sh', '-c', 'echo $PPID'])).stdout);
    expect(parent).not.toBe(process.pid);
    // The spawner is a child of this process, and one spawner serves every command.
    expect(readFileSync(`/proc/${parent}/stat`, 'utf8').split(') ')[1].split(' ')[1]).toBe(String(process.pid));
    expect(readFileSync(`/proc/${parent}/cmdline`, 'utf8')).toContain('spawnerProcess');
    expect(Number((await new LocalExecutor('pve1', { spawner: testSpawner() }).run(['sh', '-c', 'echo $PPID'])).stdout)).toBe(parent);
  });

  it('fails a command whose spawner dies as unreachable, and starts a new spawner for the next', async () => {
    const exec = new LocalExecutor('pve1', { spawner: testSpawner() });
    const spawnerPid = Number((await exec.run(['sh', '-c', 'echo $PPID'])).stdout);
    const running = exec.run(['sleep', '5']);
    await new Promise((r) => setTimeout(r, 200));
    process.kill(spawnerPid, 'SIGKILL');
    await expect(running).rejects.toBeInstanceOf(ExecutorUnreachableError);
    const next = Number((await exec.run(['sh', '-c', 'echo $PPID'])).stdout);
    expect(next).not.toBe(spawnerPid);
  });
});

describe('SshExecutor', () => {
  it('runs sessions with the environment of the sandbox sshd', async () => {
    const result = await sshExecutor().run(['sh', '-c', 'echo "$PVE_SANDBOX_NODE:$PATH"']);
    expect(result.stdout).toBe(`pve2:${sshdOptions.env.PATH}\n`);
  });

  it('shares one TCP connection among many concurrent commands', async () => {
    const exec = sshExecutor();
    const before = await acceptedLogins();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => exec.run(['sh', '-c', `sleep 0.1; echo ${i}`])),
    );
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 40 }, (_, i) => `${i}\n`));
    expect((await acceptedLogins()) - before).toBe(1);
  });

  it("waits out sshd's session limit instead of failing or dropping the connection", async () => {
    // More channels than OpenSSH's MaxSessions (10): the surplus are refused and retried.
    const exec = sshExecutor({ maxChannels: 30 });
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => exec.run(['sh', '-c', `sleep 0.2; echo ${i}`])),
    );
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 30 }, (_, i) => `${i}\n`));
  });

  it('reconnects after sshd restarts, failing only the commands cut off', async () => {
    const exec = sshExecutor();
    expect((await exec.run(['echo', 'before'])).stdout).toBe('before\n');
    const cutOff = exec.run(['sleep', '30']);
    await new Promise((r) => setTimeout(r, 300));
    await sshd.stop();
    await expect(cutOff).rejects.toBeInstanceOf(ExecutorUnreachableError);
    await expect(exec.run(['echo', 'down'])).rejects.toBeInstanceOf(ExecutorUnreachableError);
    sshd = await startNodeSshd(sshdOptions);
    expect((await exec.run(['echo', 'after'])).stdout).toBe('after\n');
  });

  it('copies a file over SFTP into place, reporting progress', async () => {
    const src = path.join(tmp, 'image-a');
    await fs.writeFile(src, Buffer.alloc(3 * 1024 * 1024, 'a'));
    const dest = path.join(tmp, 'staged', 'one.img');
    await fs.mkdir(path.dirname(dest), { recursive: true });
    const seen: number[] = [];
    await sshExecutor().putFile(src, dest, { onProgress: (sent) => seen.push(sent) });
    expect((await fs.readFile(dest)).equals(await fs.readFile(src))).toBe(true);
    expect(seen.at(-1)).toBe(3 * 1024 * 1024);
    expect(await fs.readdir(path.dirname(dest))).toEqual(['one.img']);
  });

  it('two copies to the same path at once leave one whole file, not a mix', async () => {
    // Two workers staging the same image: each writes its own part file and renames it.
    const a = path.join(tmp, 'image-a');
    const b = path.join(tmp, 'image-b');
    await fs.writeFile(a, Buffer.alloc(8 * 1024 * 1024, 'a'));
    await fs.writeFile(b, Buffer.alloc(8 * 1024 * 1024, 'b'));
    const dest = path.join(tmp, 'staged-twice', 'same.img');
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await Promise.all([sshExecutor().putFile(a, dest), sshExecutor().putFile(b, dest)]);
    const result = await fs.readFile(dest);
    const whole = [await fs.readFile(a), await fs.readFile(b)].some((src) => src.equals(result));
    expect(whole).toBe(true);
    expect(await fs.readdir(path.dirname(dest))).toEqual(['same.img']);
  });

  it('throws ExecutorUnreachableError when nothing listens', async () => {
    const exec = sshExecutor({ port: await freePort() });
    await expect(exec.run(['true'])).rejects.toBeInstanceOf(ExecutorUnreachableError);
  });

  it('throws ExecutorUnreachableError when the key is not authorized', async () => {
    const otherKey = path.join(tmp, 'other_key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', otherKey]);
    const exec = sshExecutor({ privateKeyPath: otherKey });
    await expect(exec.run(['true'])).rejects.toBeInstanceOf(ExecutorUnreachableError);
  });

  it('remembers a node host key on first use and refuses a changed one', async () => {
    const knownHostsDir = path.join(tmp, 'tofu');
    expect((await sshExecutor({ knownHostsDir }).run(['true'])).exitCode).toBe(0);
    const known = await fs.readFile(path.join(knownHostsDir, 'known_hosts'), 'utf8');
    expect(known).toMatch(new RegExp(`^pve2,\\[127\\.0\\.0\\.1\\]:${sshdOptions.port} ssh-ed25519 \\S+\\n$`));

    // The same node name answered by another machine (a fresh host key): refused.
    const impostorOptions = { ...sshdOptions, port: await freePort(), stateDir: path.join(tmp, 'impostor') };
    const impostor = await startNodeSshd(impostorOptions);
    try {
      const exec = sshExecutor({ knownHostsDir, port: impostorOptions.port });
      await expect(exec.run(['true'])).rejects.toThrow(/host key for node 'pve2' changed/);
      expect(await fs.readFile(path.join(knownHostsDir, 'known_hosts'), 'utf8')).toBe(known);
    } finally {
      await impostor.stop();
    }
  });
});
