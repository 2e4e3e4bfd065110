import fs from 'node:fs';
import { parseArgs, type CommandDef } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import { vmProcess } from '../../state/runtime';
import { agentEnabled } from '../../qemu/command';
import { guestAgentCommand } from '../../qemu/qmp';
import { loadVm } from './vm';
import { agentNetworkInterfaces } from '../agentNetwork';

/**
 * `qm guest cmd <vmid> <command>` (PVE::API2::Qemu::Agent): one guest agent command,
 * answered by the real agent of a real guest over its virtio-serial channel. A process
 * guest's stand-in agent answers `network-get-interfaces` only (../agentNetwork.ts); to the
 * rest it answers as a VM whose agent is not running does.
 */
const COMMANDS = [
  'fsfreeze-freeze', 'fsfreeze-status', 'fsfreeze-thaw', 'fstrim', 'get-fsinfo', 'get-host-name', 'get-memory-block-info',
  'get-memory-blocks', 'get-osinfo', 'get-time', 'get-timezone', 'get-users', 'get-vcpus', 'info', 'network-get-interfaces',
  'ping', 'shutdown', 'suspend-disk', 'suspend-hybrid', 'suspend-ram',
];

const DEF: CommandDef = { name: 'qm guest cmd', args: ['vmid', 'command'], props: { vmid: VMID, command: { type: 'string', enum: COMMANDS } } };

/** to_json($res, { pretty => 1, canonical => 1 }): JSON::XS indents by three, keys sorted. */
function canonicalJson(value: unknown, indent = ''): string {
  const inner = indent + '   ';
  if (Array.isArray(value)) return value.length ? `[\n${value.map((v) => inner + canonicalJson(v, inner)).join(',\n')}\n${indent}]` : '[]';
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return keys.length ? `{\n${keys.map((k) => `${inner}${JSON.stringify(k)} : ${canonicalJson((value as Record<string, unknown>)[k], inner)}`).join(',\n')}\n${indent}}` : '{}';
  }
  return JSON.stringify(value);
}

export async function qmGuestCmd(ctx: Ctx, argv: string[]): Promise<number> {
  const p = parseArgs(DEF, argv);
  const vmid = Number(p.vmid);
  const conf = loadVm(ctx, vmid);
  // PVE::QemuServer::Agent::assert_agent_available.
  if (p.command === 'network-get-interfaces') {
    ctx.out(canonicalJson(await agentNetworkInterfaces(ctx, conf, vmid)));
    return 0;
  }
  if (!agentEnabled(conf)) throw new CliError('No QEMU guest agent configured');
  if (!vmProcess(ctx.dir, vmid)) throw new CliError(`VM ${vmid} is not running`);
  const socket = ctx.paths.qgaSocket(vmid);
  if (!fs.existsSync(socket)) throw new CliError('QEMU guest agent is not running');
  let result: unknown;
  try {
    result = await guestAgentCommand(socket, `guest-${p.command}`, undefined, 10_000);
  } catch {
    throw new CliError('QEMU guest agent is not running');
  }
  if (result !== undefined && result !== null) ctx.out(canonicalJson(result));
  return 0;
}
