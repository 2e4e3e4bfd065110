import path from 'node:path';
import type { Config } from '../lib/config';
import type { SshKeyPair } from '../lib/sshKey';
import type { SandboxClusterOptions } from './cluster';
import { ensureSandboxTools, QEMU_GUEST_TOOLS, SANDBOX_TOOLS, type SandboxToolPaths } from './requirements';
import { prepareRealGuests, type GuestImages } from './qemu/images';
import { PVE_RELEASES } from './state/model';
import { clearVmProcess, runningVmids, signalVm } from './state/runtime';

/**
 * The sandbox as the service's settings describe it: shared by the service's sandbox mode
 * (app/sandbox.ts) and `npm run sandbox` (standalone.ts), so both start the same cluster.
 */

/** The simulated cluster's options. */
export function sandboxClusterOptions(config: Config, key: SshKeyPair, tools: SandboxToolPaths, guests?: GuestImages): SandboxClusterOptions {
  return {
    dir: path.join(config.dataDir, 'sandbox'),
    nodes: [...config.sandboxOptions.nodes],
    mainNode: config.mainNode,
    gateway: config.gateway,
    vmSshPort: config.vmSshPort,
    bootDelayMs: config.sandboxOptions.bootDelayMs,
    packageSilenceMs: config.sandboxOptions.packageSilenceMs,
    lockTimeoutMs: config.sandboxOptions.lockTimeoutMs,
    statusLagMs: config.sandboxOptions.statusLagMs,
    sshPortBase: config.sandboxOptions.sshPortBase,
    rootAuthorizedKey: key.publicKey,
    sshdPath: tools.sshd,
    pveVersion: PVE_RELEASES[config.sandboxOptions.pveRelease],
    pveVersions: config.sandboxOptions.pveVersions,
    guests: config.sandboxOptions.guests,
    guestArchive: config.sandboxOptions.guestArchive,
    accel: guests?.accel,
    // API mode fetches images as `import` content on PROXMOX_IMAGE_STORAGE (`local`), which
    // 8.4's installer does not enable (the sandbox's storages are 8's on either release): configured as docs/proxmox-api.md tells an operator;
    // likewise `snippets` for an install's userData (SNIPPETS_STORAGE, docs/configuration.md).
    storageContent: { local: ['backup', 'import', 'iso', 'snippets', 'vztmpl'] },
    pools: [...config.sandboxOptions.pools],
  };
}

/**
 * Real guests (SANDBOX_GUESTS=qemu): the Debian images the built-in mirror serves (built
 * here once) and whether KVM boots them. With IMAGE_BASE_* set the images are the
 * operator's and the guests run under TCG.
 */
export async function realGuests(config: Config, log: (line: string) => void = console.log): Promise<GuestImages | undefined> {
  if (config.sandboxOptions.guests !== 'qemu') return undefined;
  if (!config.imageMirror) return { files: [], accel: 'tcg' };
  return prepareRealGuests([...config.sandboxOptions.qemuImages], log);
}

/** The programs sandbox mode needs: real guests need QEMU and the image tools too. */
export async function sandboxTools(config: Config): Promise<SandboxToolPaths> {
  const tools = config.sandboxOptions.guests === 'qemu' ? [...SANDBOX_TOOLS, ...QEMU_GUEST_TOOLS] : SANDBOX_TOOLS;
  return ensureSandboxTools({ toolsPath: config.sandboxOptions.toolsPath, tools });
}

/**
 * Kills the sandbox VMs a service left running in `dataDir`: the service keeps them across
 * its own stops on purpose (docs/sandbox.md), a test or a benchmark does not.
 */
export function killSandboxVms(dataDir: string): void {
  const sandboxDir = path.join(dataDir, 'sandbox');
  for (const vmid of runningVmids(sandboxDir)) {
    signalVm(sandboxDir, vmid, 'SIGKILL', 5000);
    clearVmProcess(sandboxDir, vmid);
  }
}
