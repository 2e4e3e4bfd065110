import path from 'node:path';
import type { Config } from '../lib/config';
import type { SshKeyPair } from '../lib/sshKey';
import type { RunRecords } from '../lib/run/records';
import type { SandboxToolPaths } from '../sandbox/requirements';
import type { GuestImages } from '../sandbox/qemu/images';

/**
 * Sandbox mode (no MAIN_NODE): the simulated Proxmox cluster and the built-in image
 * mirror, loaded only when used. Each rewrites the part of the config it stands in for.
 */

/** The simulated cluster as the settings describe it: shared by the service and `npm run sandbox`. */
export function sandboxClusterOptions(config: Config, key: SshKeyPair, tools: SandboxToolPaths, guests?: GuestImages) {
  return {
    dir: path.join(config.dataDir, 'sandbox'),
    nodes: config.sandboxOptions.nodes,
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
    pveVersions: config.sandboxOptions.pveVersions,
    guests: config.sandboxOptions.guests,
    guestArchive: config.sandboxOptions.guestArchive,
    accel: guests?.accel,
    // API mode fetches images as `import` content on PROXMOX_IMAGE_STORAGE (`local`), which
    // 8.4's installer does not enable: configured as docs/proxmox-api.md tells an operator.
    storageContent: { local: ['backup', 'import', 'iso', 'vztmpl'] },
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
  const { prepareRealGuests } = await import('../sandbox/qemu/images');
  return prepareRealGuests(config.sandboxOptions.qemuImages, log);
}

/** The programs sandbox mode needs: real guests need QEMU and the image tools too. */
export async function sandboxTools(config: Config): Promise<SandboxToolPaths> {
  const { ensureSandboxTools, SANDBOX_TOOLS, QEMU_GUEST_TOOLS } = await import('../sandbox/requirements');
  const tools = config.sandboxOptions.guests === 'qemu' ? [...SANDBOX_TOOLS, ...QEMU_GUEST_TOOLS] : SANDBOX_TOOLS;
  return ensureSandboxTools({ toolsPath: config.sandboxOptions.toolsPath, tools });
}

export async function startSandbox(config: Config, key: SshKeyPair, run: RunRecords, tools: SandboxToolPaths, guests?: GuestImages) {
  const { startSandboxCluster } = await import('../sandbox/cluster');
  const cluster = await startSandboxCluster({ ...sandboxClusterOptions(config, key, tools, guests), api: { port: config.sandboxOptions.apiPort } });
  for (const [node, pid] of Object.entries(cluster.sshdPids)) run.record(`sandbox-sshd-${node}`, `sandbox node ${node}'s sshd`, pid);
  // The nodes the rest of the service talks to are the sandbox's.
  config.nodes = cluster.nodeAddresses;
  return cluster;
}

/** Sandbox mode's own images, unless IMAGE_BASE_* name a source: a first run needs no network. */
export async function startImages(config: Config, guests?: GuestImages) {
  if (!config.imageMirror) return undefined;
  const { startImageMirror } = await import('../sandbox/mirror/server');
  // Real guests boot real Debian images; the other OSes stay stand-ins (process guests).
  const mirror = await startImageMirror({ files: guests?.files });
  config.imageBase = mirror.baseUrls;
  return mirror;
}
