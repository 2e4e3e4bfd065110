import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { appendCall } from '../state/callLog';
import { clusterPaths } from '../state/paths';
import { readIfExists, writeFileAtomic } from '../state/files';
import { TOOLS, runTool, type Tool } from './run';
import { vmLockFile } from './qm/vm';

/**
 * The resident CLI server of one sandbox cluster: `node tsrun.js cli/server.ts <dir>`.
 *
 * Starting Node and loading the CLI costs ~100 ms a call (far more on a busy machine),
 * against a few ms for the command itself; an install makes ~25 calls. So sandbox/bin/*
 * (bash) hand the call to this process over loopback TCP when it runs, and only start
 * Node themselves when it does not, for commands that wait on a VM process, and while a
 * fault is injected (a hanging call must be its own process, to be killed and logged as
 * Proxmox's would be).
 *
 * Any local user can connect to a loopback port, and this server runs every command as the
 * cluster's owner. So `cli.port` holds the port and a random token, and is readable by the
 * owner only (0600): a request must start with that token, or it is refused before a byte
 * more is read. The sandbox's own callers (the service's local commands, the node sshds'
 * sessions) run as that owner, or as root.
 *
 * Request: NUL-terminated fields: the token, the client's start time ($EPOCHREALTIME),
 * cluster dir, node, tool, argument count, arguments. Answer: `refused` (the token is wrong),
 * or one line `<exit code> <stderr file|->` (or `fallback`), then stdout's bytes until the
 * connection closes.
 */

const dir = path.resolve(process.argv[2] ?? '');
const paths = clusterPaths(dir);
const portFile = path.join(paths.root, 'sandbox', 'cli.port');
const errDir = path.join(paths.runDir, 'cli-stderr');
const token = crypto.randomBytes(32).toString('hex');
const tokenDigest = crypto.createHash('sha256').update(token).digest();
/** A call's arguments are a command line: far below this. */
const MAX_REQUEST_BYTES = 4 << 20;
let served = 0;

/** Compared as digests: equal lengths for timingSafeEqual, in constant time. */
function tokenMatches(given: Buffer): boolean {
  return crypto.timingSafeEqual(crypto.createHash('sha256').update(given).digest(), tokenDigest);
}

/** The request's fields after the token, once all have arrived. */
function parse(buf: Buffer): string[] | undefined {
  const fields: string[] = [];
  let start = 0;
  for (let i = 0; i < buf.length; i++) {
    if (buf[i] !== 0) continue;
    fields.push(buf.subarray(start, i).toString('utf8'));
    start = i + 1;
    if (fields.length >= 6 && fields.length === 6 + Number(fields[5])) return fields.slice(1);
  }
  return undefined;
}

/**
 * Commands that wait for a guest to go (up to a minute for an ACPI shutdown), or for a
 * storage (a clone or template holds the storage's lock while it works, and parallel
 * clones queue on it), run as their own process: here, one slow call would hold up every
 * other call of the cluster, and no two could contend for a lock.
 */
const WAITING = new Set(['stop', 'shutdown', 'reboot', 'clone', 'template']);

/** Faults injected and not all consumed yet (the file stays behind as `[]`). */
function faultsPending(): boolean {
  const raw = readIfExists(paths.faults);
  if (raw === undefined) return false;
  try {
    return (JSON.parse(raw) as unknown[]).length > 0;
  } catch {
    return true;
  }
}

/** Whether the VM a `qm` call names (its first number) has its config lock taken. */
function vmLockHeld(args: string[]): boolean {
  const vmid = args.find((a) => /^\d+$/.test(a));
  return vmid !== undefined && fs.existsSync(vmLockFile(paths.locksDir, Number(vmid)));
}

async function serve(fields: string[], socket: net.Socket): Promise<void> {
  const [clientStart, clusterDir, node, tool, , ...args] = fields;
  // Another cluster's call, an unknown tool, a command that waits, a fault to inject, or
  // a VM whose config lock someone holds (the call may wait for it): the CLI runs as its
  // own process.
  if (path.resolve(clusterDir) !== dir || !(tool in TOOLS) || (tool === 'qm' && WAITING.has(args[0])) || faultsPending() || (tool === 'qm' && vmLockHeld(args))) {
    socket.end('fallback\n');
    return;
  }
  const startedAt = Date.now();
  const clientStartMs = Number(clientStart) * 1000;
  const out: string[] = [];
  const err: string[] = [];
  const code = (await runTool(dir, node, tool as Tool, args, { out: (l) => out.push(l + '\n'), err: (l) => err.push(l + '\n') })) ?? 255;
  appendCall(dir, {
    node,
    argv: [tool, ...args],
    exitCode: code,
    startedAt: new Date(startedAt).toISOString(),
    durationMs: Date.now() - startedAt,
    ...(Number.isFinite(clientStartMs) && clientStartMs > 0 ? { startupMs: Math.max(0, Math.round(startedAt - clientStartMs)) } : {}),
    resident: true,
  });
  let errFile = '-';
  if (err.length > 0) {
    errFile = path.join(errDir, `${process.pid}-${++served}.err`);
    fs.writeFileSync(errFile, err.join(''));
  }
  socket.end(`${code} ${errFile}\n${out.join('')}`);
}

const server = net.createServer((socket) => {
  let buf = Buffer.alloc(0);
  let trusted = false;
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    if (!trusted) {
      const end = buf.indexOf(0);
      // The token is 64 characters: whoever sends more, or another, is refused at once.
      if (end < 0 && buf.length <= token.length) return;
      if (end < 0 || !tokenMatches(buf.subarray(0, end))) {
        socket.removeAllListeners('data');
        socket.end('refused\n');
        return;
      }
      trusted = true;
    }
    if (buf.length > MAX_REQUEST_BYTES) {
      socket.removeAllListeners('data');
      socket.end('255 -\n');
      return;
    }
    const fields = parse(buf);
    if (!fields) return;
    socket.removeAllListeners('data');
    serve(fields, socket).catch((e) => socket.end(`255 -\n`, () => process.stderr.write(`sandbox CLI server: ${(e as Error).stack}\n`)));
  });
});

fs.mkdirSync(errDir, { recursive: true });
server.listen(0, '127.0.0.1', () => {
  // Owner-only: the token in it is what lets a caller run commands here.
  writeFileAtomic(portFile, `${(server.address() as net.AddressInfo).port} ${token}\n`, 0o600);
  process.stdout.write('ready\n');
});

// It lives as long as the process that started it: stdin closes when that one goes.
process.stdin.resume();
process.stdin.on('end', () => {
  fs.rmSync(portFile, { force: true });
  process.exit(0);
});
process.on('SIGTERM', () => {
  fs.rmSync(portFile, { force: true });
  process.exit(0);
});
