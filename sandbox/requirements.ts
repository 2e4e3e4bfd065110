import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { SandboxSetupError } from './setupError';
import { OVMF_DIR } from './qemu/firmware';

/**
 * The programs sandbox mode starts, and the Debian packages that carry them. Checked
 * before anything starts, so that a fresh machine gets one line naming the packages
 * instead of a spawn error half-way through start-up. As root with apt-get at hand the
 * packages are installed on the spot, as `npm start` already builds the Temporal CLI.
 */

export interface SandboxTool {
  /** A program looked up on the PATH, or a data file named by its absolute path. */
  command: string;
  package: string;
  /** What the sandbox uses it for. */
  use: string;
}

export const SANDBOX_TOOLS: readonly SandboxTool[] = [
  { command: 'sshd', package: 'openssh-server', use: "the nodes' management SSH" },
  { command: 'ssh-keygen', package: 'openssh-client', use: 'host and service keys' },
  { command: 'bwrap', package: 'bubblewrap', use: "the VMs' isolated roots" },
  { command: 'setpriv', package: 'util-linux', use: "the guests' login users" },
];

/** What real guests (SANDBOX_GUESTS=qemu) need besides: QEMU and the tools of their disks and images. */
export const QEMU_GUEST_TOOLS: readonly SandboxTool[] = [
  { command: 'qemu-system-x86_64', package: 'qemu-system-x86', use: 'the real guests' },
  { command: 'qemu-img', package: 'qemu-utils', use: "the guests' volumes" },
  { command: 'genisoimage', package: 'genisoimage', use: 'the cloud-init drives' },
  { command: 'socat', package: 'socat', use: "the guests' way to the package archive" },
  { command: 'mmdebstrap', package: 'mmdebstrap', use: 'building the Debian cloud images' },
  // Only the 4 MiB build is checked: it is what every install with `bios: ovmf` boots.
  { command: `${OVMF_DIR}/OVMF_CODE_4M.fd`, package: 'ovmf', use: 'the UEFI firmware of guests with bios: ovmf' },
];

/** sshd lives in an sbin directory, which a non-root PATH usually lacks. */
const SYSTEM_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** Absolute path of each sandbox tool, by command name. */
export type SandboxToolPaths = Record<string, string>;

export interface EnsureToolsOptions {
  /** SANDBOX_TOOLS_PATH: the only directories searched; nothing is installed then. */
  toolsPath?: string;
  /** Default: PATH. Where apt-get is looked for, and searched before the system dirs. */
  path?: string;
  /** Searched after `path`; default the usual bin and sbin directories. */
  systemDirs?: string[];
  /** Default: this process runs as uid 0. */
  isRoot?: boolean;
  /** Runs apt-get; the default runs the real one. */
  install?: (aptGet: string, packages: string[]) => Promise<void>;
  /** Where the one "installing" line goes. Default console.log. */
  log?: (line: string) => void;
  /** Default SANDBOX_TOOLS; real guests add QEMU_GUEST_TOOLS. */
  tools?: readonly SandboxTool[];
}

function executable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function which(command: string, dirs: string[]): string | undefined {
  if (path.isAbsolute(command)) return fs.existsSync(command) ? command : undefined;
  for (const dir of dirs) {
    const file = path.join(dir, command);
    if (executable(file)) return file;
  }
  return undefined;
}

function splitPath(p: string | undefined): string[] {
  return (p ?? '').split(':').filter((d) => d !== '' && path.isAbsolute(d));
}

export function findSandboxTools(dirs: string[], tools: readonly SandboxTool[] = SANDBOX_TOOLS): { found: SandboxToolPaths; missing: SandboxTool[] } {
  const found: SandboxToolPaths = {};
  const missing: SandboxTool[] = [];
  for (const tool of tools) {
    const file = which(tool.command, dirs);
    if (file) found[tool.command] = file;
    else missing.push(tool);
  }
  return { found, missing };
}

const packagesOf = (tools: SandboxTool[]) => [...new Set(tools.map((t) => t.package))];
const commandsOf = (tools: SandboxTool[]) => tools.map((t) => t.command).join(', ');

async function aptGetInstall(aptGet: string, packages: string[]): Promise<void> {
  const run = promisify(execFile);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => run(aptGet, ['install', '-y', '-qq', '--no-install-recommends', ...packages], { env, timeout: 15 * 60_000 });
  try {
    await install();
  } catch {
    // A fresh machine (a new container) has no package lists yet.
    await run(aptGet, ['update', '-qq'], { env, timeout: 10 * 60_000 });
    await install();
  }
}

/** Last non-empty line of a failed child's stderr, or its message. */
function reason(err: unknown): string {
  const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
  return stderr.split('\n').filter(Boolean).at(-1) ?? (err as Error).message;
}

/**
 * Finds every sandbox tool, installing the missing packages first when that is possible
 * here (root, apt-get, no SANDBOX_TOOLS_PATH); otherwise throws a SandboxSetupError naming the
 * packages and the command that installs them.
 */
export async function ensureSandboxTools(o: EnsureToolsOptions = {}): Promise<SandboxToolPaths> {
  const searchPath = o.path ?? process.env.PATH;
  const systemDirs = o.systemDirs ?? SYSTEM_DIRS;
  const dirs = o.toolsPath !== undefined ? splitPath(o.toolsPath) : [...new Set([...splitPath(searchPath), ...systemDirs])];
  const first = findSandboxTools(dirs, o.tools);
  if (first.missing.length === 0) return first.found;

  const packages = packagesOf(first.missing);
  const isRoot = o.isRoot ?? process.getuid?.() === 0;
  const command = `${isRoot ? '' : 'sudo '}apt-get install -y ${packages.join(' ')}`;
  const commands = commandsOf(first.missing);
  const needs = `sandbox mode needs ${commands} (Debian ${packages.length > 1 ? 'packages' : 'package'} ${packages.join(' ')})`;
  if (o.toolsPath !== undefined) {
    throw new SandboxSetupError(`${needs}, not found in SANDBOX_TOOLS_PATH=${o.toolsPath}: install with \`${command}\` and unset SANDBOX_TOOLS_PATH, or point it at them.`);
  }
  const aptGet = which('apt-get', [...splitPath(searchPath), ...systemDirs]);
  if (!isRoot || !aptGet) {
    throw new SandboxSetupError(`${needs}: install ${packages.length > 1 ? 'them' : 'it'} with \`${command}\`, then start again.`);
  }

  (o.log ?? console.log)(`Installing ${packages.join(' ')} with apt-get: sandbox mode needs ${commands}.`);
  try {
    await (o.install ?? aptGetInstall)(aptGet, packages);
  } catch (err) {
    throw new SandboxSetupError(`${needs}; \`apt-get install\` failed (${reason(err)}): install ${packages.join(' ')} by hand, then start again.`);
  }
  const second = findSandboxTools(dirs, o.tools);
  if (second.missing.length > 0) {
    throw new SandboxSetupError(`${commandsOf(second.missing)} still missing after \`apt-get install ${packages.join(' ')}\`: install by hand, then start again.`);
  }
  return second.found;
}
