import fs from 'node:fs';
import path from 'node:path';
import { CliError } from './errors';
import type { Ctx } from './context';
import { vmConfOn } from './pvesh';
import { vmProcess } from '../state/runtime';
import { agentEnabled } from '../qemu/command';
import { guestAgentCommand } from '../qemu/qmp';

/** qemu-server's `$MAX_READ_SIZE` and its read chunk. */
const MAX_READ_SIZE = 16 * 1024 * 1024;
const READ_SIZE = 1024 * 1024;

export interface AgentFileRead {
  content: string;
  'bytes-read': number;
  truncated?: number;
}

/**
 * `GET /nodes/{node}/qemu/{vmid}/agent/file-read` (PVE::API2::Qemu::Agent): a file of the
 * running guest, through its agent, with Proxmox's errors (PVE::QemuServer::Agent's
 * assert_agent_available, then the QMP client's `VM <vmid> qmp command '<cmd>' failed - <desc>`).
 * A real guest's own agent answers over its virtio-serial channel; a process guest's
 * stands-in agent reads the guest's root directory, where its sshd's host key is.
 */
export async function agentFileRead(ctx: Ctx, node: string, vmid: number, file: string): Promise<AgentFileRead> {
  const conf = vmConfOn(ctx, node, vmid);
  if (!agentEnabled(conf)) throw new CliError('No QEMU guest agent configured');
  if (!vmProcess(ctx.dir, vmid)) throw new CliError(`VM ${vmid} is not running`);
  const content = ctx.model.guests === 'qemu' ? await readOverAgent(ctx, vmid, file) : readFromGuestRoot(ctx, vmid, file);
  const truncated = content.length > MAX_READ_SIZE;
  const kept = content.subarray(0, MAX_READ_SIZE);
  // Perl's string of bytes, shipped as JSON: each byte one character.
  return { content: kept.toString('latin1'), 'bytes-read': kept.length, ...(truncated ? { truncated: 1 } : {}) };
}

const qmpFailed = (vmid: number, cmd: string, desc: string) => new CliError(`VM ${vmid} qmp command '${cmd}' failed - ${desc}`);

async function readOverAgent(ctx: Ctx, vmid: number, file: string): Promise<Buffer> {
  const socket = ctx.paths.qgaSocket(vmid);
  // qga_check_running: a guest-ping that fails means no agent.
  try {
    if (!fs.existsSync(socket)) throw new Error('no socket');
    await guestAgentCommand(socket, 'guest-ping', undefined, 3000);
  } catch {
    throw new CliError('QEMU guest agent is not running');
  }
  const call = async (cmd: string, args: object) => {
    try {
      return await guestAgentCommand(socket, cmd, args, 10_000);
    } catch (err) {
      throw qmpFailed(vmid, cmd, (err as Error).message);
    }
  };
  const handle = (await call('guest-file-open', { path: file })) as number;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for (;;) {
      const r = (await call('guest-file-read', { handle, count: READ_SIZE })) as { count: number; 'buf-b64': string; eof: boolean };
      chunks.push(Buffer.from(r['buf-b64'], 'base64'));
      total += r.count;
      if (r.eof || total > MAX_READ_SIZE) break;
    }
  } finally {
    await call('guest-file-close', { handle }).catch(() => undefined);
  }
  return Buffer.concat(chunks);
}

/** As qemu-ga would: the path as the guest sees it, never leaving the guest's root. */
function readFromGuestRoot(ctx: Ctx, vmid: number, file: string): Buffer {
  const fail = (reason: string) => qmpFailed(vmid, 'guest-file-open', `failed to open file '${file}' (mode: 'r'): ${reason}`);
  let root: string;
  let real: string;
  try {
    // Before the guest's first boot has made its root, nothing is there to read.
    root = fs.realpathSync(ctx.paths.guestRoot(vmid));
    real = fs.realpathSync(path.join(root, path.posix.resolve('/', file)));
  } catch {
    throw fail('No such file or directory');
  }
  if (real !== root && !real.startsWith(`${root}/`)) throw fail('No such file or directory');
  try {
    return fs.readFileSync(real);
  } catch (err) {
    throw fail((err as NodeJS.ErrnoException).code === 'EISDIR' ? 'Is a directory' : 'Permission denied');
  }
}
