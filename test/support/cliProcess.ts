import net from 'node:net';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { Screen } from './screen';

/**
 * The `qemurun` CLI as an operator runs it: its bin script in a process of its own, either
 * with pipes (not a terminal) or in a real pseudo-terminal made by util-linux `script`,
 * whose output a terminal emulator turns back into the screen a person sees.
 */

const REPO = path.resolve(__dirname, '..', '..');
const BIN = path.join(REPO, 'bin', 'qemurun.js');

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function cliEnv(url: string, env: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH!, HOME: process.env.HOME!, QEMURUN_URL: url, ...env };
}

/** Runs the CLI with pipes for stdin, stdout and stderr. */
export function runCli(url: string, args: string[], env: Record<string, string> = {}): ResultPromise<{ reject: false; extendEnv: false }> {
  return execa(process.execPath, [BIN, ...args], { cwd: REPO, env: cliEnv(url, env), extendEnv: false, reject: false });
}

export interface PtySession {
  screen: Screen;
  /** Resolves with the CLI's exit status. */
  exit: Promise<number>;
  /** Types Ctrl-C: the terminal turns it into SIGINT for the CLI. */
  interrupt(): void;
  /** Resolves once some screen so far satisfies `pred`; rejects after `timeoutMs`. */
  waitFor(pred: (lines: string[]) => boolean, timeoutMs?: number): Promise<string[]>;
}

/** Runs the CLI in a pseudo-terminal of `cols` x `rows`. */
export function runCliInPty(url: string, args: string[], { cols = 100, rows = 40 } = {}): PtySession {
  const screen = new Screen(cols, rows);
  const command = `stty cols ${cols} rows ${rows}; exec ${quote(process.execPath)} ${quote(BIN)} ${args.map(quote).join(' ')}`;
  // -e: script exits with the command's status; -f: output is flushed as it comes.
  const child = execa('script', ['-qfec', command, '/dev/null'], {
    cwd: REPO,
    env: cliEnv(url, { TERM: 'xterm-256color' }),
    extendEnv: false,
    reject: false,
    stdin: 'pipe',
    encoding: 'utf8',
  });
  let fed = Promise.resolve();
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    fed = fed.then(() => screen.feed(chunk));
  });
  const exit = child.then(async (r) => {
    await fed;
    child.stdin.end();
    return r.exitCode ?? -1;
  });
  return {
    screen,
    exit,
    interrupt: () => void child.stdin.write('\x03'),
    async waitFor(pred, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        await fed;
        const seen = screen.snapshots.find(pred);
        if (seen) return seen;
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`screen never matched; it shows:\n${screen.text()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/**
 * A TCP proxy in front of the API that cuts its first connection once `cutAfterBytes` of
 * the answer went through, as a network dropping a long-lived stream would; later
 * connections pass untouched.
 */
export async function flakyProxy(target: URL, cutAfterBytes: number): Promise<{ url: string; cuts: () => number; close: () => Promise<void> }> {
  let connections = 0;
  let cuts = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const first = connections++ === 0;
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let bytes = 0;
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (first && bytes > cutAfterBytes) {
        cuts++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => client.end());
    for (const s of [client, upstream]) s.on('error', () => (s === client ? upstream : client).destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    cuts: () => cuts,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
