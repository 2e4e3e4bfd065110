import fs from 'node:fs';
import { Command, Option } from 'commander';
import { integer } from '../args';
import { readBody } from '../client';
import type { InstallBody } from '../../contract';
import type { Context, Runner } from '../context';
import { CliError, EXIT } from '../exitCodes';
import { followOperation } from '../operation';
import { printAnswer } from '../output';

/** Fields of the install body the server ignores (as the seed did): no flag sets them. */
type IgnoredField = 'gateway';

/**
 * A flag for each field of the install body, named like it. Keyed by the body schema's
 * fields (contract/requests.ts, a type import: the CLI loads none of the service's code),
 * so a field added to the body and not here does not compile. Integers are checked here,
 * every rule by the API, which answers 400 naming the field.
 */
const FLAGS: { [F in Exclude<keyof InstallBody, IgnoredField>]-?: { flag: string; help: string; int?: boolean; parse?: (v: string) => unknown } } = {
  os: { flag: '--os <os>', help: 'debian, ubuntu or rockylinux' },
  version: { flag: '--version <version>', help: 'debian 11 12 13; ubuntu 20.04 22.04 24.04; rockylinux 8 9 10' },
  id: { flag: '--id <vmid>', help: 'VMID 100..254, any VMID with address pools (default: the next free one)', int: true },
  name: { flag: '--name <name>', help: 'name prefix; the VM is named <name>-<vmid>' },
  node: { flag: '--node <node>', help: 'node to migrate to before the first boot' },
  cpu: { flag: '--cpu <n>', help: 'cores (≤ 0 → 1, capped by VM_MAX_CPU)', int: true },
  ram: { flag: '--ram <mb>', help: 'memory in MB (< 512 → 512)', int: true },
  disk: { flag: '--disk <size>', help: 'disk size, e.g. 32G (< 16G → 16G)' },
  user: { flag: '--user <user>', help: 'cloud-init user' },
  passwd: { flag: '--passwd <password>', help: "the user's password (visible to other local users in ps; prefer -f)" },
  pubkey: { flag: '--pubkey <key>', help: 'SSH public key(s) to log in with' },
  tags: { flag: '--tags <tags>', help: 'Proxmox tags besides the OS tag, separated by , ; or spaces', parse: tagList },
  description: { flag: '--description <text>', help: "the VM's notes, kept beside QemuRun's markers" },
  pool: { flag: '--pool <pool>', help: 'the Proxmox resource pool to create the VM in' },
  storage: { flag: '--storage <storage>', help: 'the storage of the boot disk and cloud-init drive (default: ASSIGN_STORAGE)' },
  bridge: { flag: '--bridge <bridge>', help: "the Proxmox bridge of the VM's NIC (default: VM_BRIDGE)" },
  vlan: { flag: '--vlan <tag>', help: 'VLAN tag of the NIC, 1..4094 (default: untagged)', int: true },
  mtu: { flag: '--mtu <mtu>', help: "MTU of the NIC, 576..65520, at most the bridge's (default: the bridge's)", int: true },
  // The servers; --dns-search adds the search domain to the same field.
  dns: { flag: '--dns <ip,...>', help: 'DNS servers, comma-separated, up to 3 (default: the node\'s)', parse: (v) => ({ servers: v.split(',').map((s) => s.trim()) }) },
  disks: { flag: '--disks <disks>', help: 'extra data disks scsi1.., comma-separated SIZE[:STORAGE], e.g. 32G,100G:local-lvm (default storage: --storage)', parse: diskList },
  machine: { flag: '--machine <type>', help: 'q35 or pc (Proxmox default: pc)' },
  addressPool: { flag: '--address-pool <name>', help: 'the address pool (ADDRESS_POOLS) to lease the address from (default: the first)' },
  ip: { flag: '--ip <dhcp|address>', help: "dhcp: the VM's address by DHCP, read from its guest agent; or one free address of an address pool (default: the pool's next free one, else GATEWAY's /24 and the VMID)" },
  bios: { flag: '--bios <bios>', help: 'seabios or ovmf (ovmf adds an EFI disk, no pre-enrolled Secure Boot keys)' },
  reboot: { flag: '--reboot <when>', help: 'auto or always: after the init script of an image install, reboot when the guest needs it, or always (default: auto)' },
  source: { flag: '--source <source>', help: 'template or image (default: a clone of the fresh template of the OS version when there is one, else the image)' },
  // A file, not the text: user-data is long, and may hold secrets that do not belong in ps.
  userData: { flag: '--user-data <file>', help: 'a #cloud-config file merged into the VM\'s cloud-init user-data (CLI mode only, SNIPPETS_STORAGE)', parse: (v) => readFile(v) },
};
const FIELDS = Object.entries(FLAGS).map(([field, f]) => ({ field, ...f }));

export interface InstallFlags {
  file?: string;
  pubkeyFile?: string;
  dnsSearch?: string;
  async?: boolean;
  idempotencyKey?: string;
  cancelOnInterrupt?: boolean;
  [field: string]: unknown;
}

/** The request body: the spec file's fields, overridden by the flags given. */
function installBody(flags: InstallFlags): Record<string, unknown> {
  let body: Record<string, unknown> = {};
  if (flags.file) {
    const text = flags.file === '-' ? fs.readFileSync(0, 'utf8') : readFile(flags.file);
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new CliError(`${flags.file}: not JSON (${(err as Error).message})`, EXIT.usage);
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new CliError(`${flags.file}: must hold a JSON object`, EXIT.usage);
  }
  // --dns and --dns-search each set their part of the file's `dns`, leaving the other.
  const fileDns = body.dns && typeof body.dns === 'object' && !Array.isArray(body.dns) ? body.dns : {};
  for (const { field } of FIELDS) if (flags[field] !== undefined) body[field] = flags[field];
  if (flags.dns !== undefined || flags.dnsSearch !== undefined) {
    body.dns = { ...fileDns, ...(flags.dns as object | undefined), ...(flags.dnsSearch !== undefined ? { search: flags.dnsSearch } : {}) };
  }
  if (flags.pubkeyFile) body.pubkey = readFile(flags.pubkeyFile).trim();
  return body;
}

function readFile(path: string): string {
  try {
    return fs.readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, EXIT.usage);
  }
}

async function install(ctx: Context, flags: InstallFlags): Promise<number> {
  const body = installBody(flags);
  const headers: Record<string, string> = {};
  if (flags.idempotencyKey) headers['Idempotency-Key'] = flags.idempotencyKey;
  if (flags.async) headers.Prefer = 'respond-async';
  return followOperation(ctx, (signal) => ctx.client.send('POST', '/api/vm/install', { body, headers, signal }), {
    ...flags,
    // Prefer: respond-async: 202 and the workflow id, no stream.
    plainAnswer: async (res) =>
      printAnswer(ctx, { status: res.status, headers: res.headers, body: await readBody(res) }, (b: { workflowId: string }) =>
        [`install started: workflow ${b.workflowId}`, `follow it:   qemurun attach ${b.workflowId}`, `its status:  qemurun status ${b.workflowId}`].join('\n'),
      ),
  });
}

/** `--disks 32G,100G:local-lvm` as the body's `disks` (the API checks sizes and storages). */
function diskList(value: string): Array<{ size: string; storage?: string }> {
  return value
    .split(',')
    .filter(Boolean)
    .map((d) => {
      const [size, storage] = d.split(':', 2);
      return storage ? { size, storage } : { size };
    });
}

/** A list as Proxmox splits `--tags` (pve-common `split_list`): on , ; and white space. */
function tagList(value: string): string[] {
  return value.split(/[,;\s]+/).filter(Boolean);
}

export function installCommand(run: Runner): Command {
  const cmd = new Command('install').description('install a VM from an official cloud image and follow its progress');
  cmd.option('-f, --file <spec.json>', 'the install body as a JSON file (- for stdin); flags override its fields');
  for (const f of FIELDS) {
    const parse = f.int ? integer : f.parse;
    cmd.addOption(parse ? new Option(f.flag, f.help).argParser(parse) : new Option(f.flag, f.help));
  }
  cmd
    .option('--dns-search <domain>', "the VM's DNS search domain (with --dns or alone; default: the node's)")
    .option('--pubkey-file <path>', 'read pubkey from a file (e.g. ~/.ssh/id_ed25519.pub)')
    .option('--async', 'start the install and print its workflow id, without following it (Prefer: respond-async)')
    .option('--idempotency-key <key>', 'a repeat with the same key attaches to the install the first one started')
    .option('--cancel-on-interrupt', 'Ctrl-C cancels the install (its VM is removed) instead of detaching')
    .action(run((ctx, flags: InstallFlags) => install(ctx, flags)));
  return cmd;
}
