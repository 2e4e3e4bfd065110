import path from 'node:path';
import type { Config } from '../lib/config';
import type { SshKeyPair } from '../lib/sshKey';
import type { RunRecords } from '../lib/run/records';
import type { GuestImages, SandboxClusterOptions, SandboxToolPaths } from '@qemurun/sandbox';
import { OS_VERSIONS } from '../contract';
import { reason, StartupError } from '../lib/startupError';

export type { GuestImages, SandboxToolPaths };

/**
 * Sandbox mode (no MAIN_NODE): the simulated cluster and the built-in image mirror of the
 * @qemurun/sandbox package (sandbox/), loaded only when used. The one product module that
 * loads it, as eslint.config.mjs enforces. The sandbox reads none of the service's
 * settings: what it is to be (nodes, ports, the Proxmox release it plays) is decided here,
 * from the config, and passed in. `sandboxedConfig` puts the parts that run in place of
 * the parts of the config they stand in for. `npm run sandbox` (scripts/sandbox.ts) starts
 * the same cluster through these functions.
 */

type Sandbox = typeof import('@qemurun/sandbox');

/**
 * The package, loaded when sandbox mode runs. The production image leaves it out
 * (Dockerfile): there, no MAIN_NODE is a set-up error naming the fix, not a missing module.
 */
async function loadSandbox(): Promise<Sandbox> {
  try {
    return await import('@qemurun/sandbox');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && reason(err).includes("'@qemurun/sandbox'")) {
      throw new StartupError('MAIN_NODE is not set, and this build has no Proxmox sandbox to stand in for a cluster (the production image leaves it out; a checkout needs npm install with its dev dependencies): set MAIN_NODE and NODE_<name> (docs/configuration.md)', undefined, { cause: err });
    }
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && /[/\\]sandbox[/\\]dist[/\\]/.test(reason(err))) {
      throw new StartupError('MAIN_NODE is not set, and the Proxmox sandbox (sandbox/) is not built: run `npm run build` (npm start does), or set MAIN_NODE and NODE_<name> (docs/configuration.md)', undefined, { cause: err });
    }
    throw err;
  }
}

/** Runs `step` with the sandbox; what it cannot set up on this machine is a set-up error of the service's. */
async function withSandbox<T>(step: (sandbox: Sandbox) => Promise<T>): Promise<T> {
  const sandbox = await loadSandbox();
  try {
    return await step(sandbox);
  } catch (err) {
    if (err instanceof sandbox.SandboxSetupError) throw new StartupError(err.message, undefined, { cause: err });
    throw err;
  }
}

/** The sandbox cluster's directory in the service's data directory. */
export function sandboxDir(dataDir: string): string {
  return path.join(dataDir, 'sandbox');
}

/** The simulated cluster's options, as the service's settings (SANDBOX_* and the VM network's) describe it. */
export function sandboxClusterOptions(sandbox: Pick<Sandbox, 'PVE_RELEASES'>, config: Config, key: SshKeyPair, tools: SandboxToolPaths, guests?: GuestImages): SandboxClusterOptions {
  return {
    dir: sandboxDir(config.dataDir),
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
    pveVersion: sandbox.PVE_RELEASES[config.sandboxOptions.pveRelease],
    pveVersions: config.sandboxOptions.pveVersions,
    guests: config.sandboxOptions.guests,
    guestArchive: config.sandboxOptions.guestArchive,
    accel: guests?.accel,
    // API mode fetches images as `import` content on PROXMOX_IMAGE_STORAGE (`local`), which
    // 8.4's installer does not enable (the sandbox's storages are 8's on either release): configured as docs/proxmox-api.md tells an operator;
    // likewise `snippets` for an install's userData (SNIPPETS_STORAGE, docs/configuration.md).
    storageContent: { local: ['backup', 'import', 'iso', 'snippets', 'vztmpl'] },
    pools: [...config.sandboxOptions.pools],
    api: { port: config.sandboxOptions.apiPort },
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
  return withSandbox((sandbox) => sandbox.prepareRealGuests([...config.sandboxOptions.qemuImages], log));
}

/** The programs sandbox mode needs: real guests need QEMU and the image tools too. */
export async function sandboxTools(config: Config): Promise<SandboxToolPaths> {
  return withSandbox((sandbox) => {
    const tools = config.sandboxOptions.guests === 'qemu' ? [...sandbox.SANDBOX_TOOLS, ...sandbox.QEMU_GUEST_TOOLS] : sandbox.SANDBOX_TOOLS;
    return sandbox.ensureSandboxTools({ toolsPath: config.sandboxOptions.toolsPath, tools });
  });
}

/** Starts the simulated cluster (its node sshds recorded in `run`) with its REST API. */
export async function startSandbox(config: Config, key: SshKeyPair, run: RunRecords, tools: SandboxToolPaths, guests?: GuestImages) {
  return withSandbox(async (sandbox) => {
    const cluster = await sandbox.startSandboxCluster(sandboxClusterOptions(sandbox, config, key, tools, guests));
    for (const [node, pid] of Object.entries(cluster.sshdPids)) run.record(`sandbox-sshd-${node}`, `sandbox node ${node}'s sshd`, pid);
    return cluster;
  });
}

/** Sandbox mode's own images, unless IMAGE_BASE_* name a source: a first run needs no network. */
export async function startImages(config: Config, guests?: GuestImages) {
  if (!config.imageMirror) return undefined;
  // Every version the service offers; real guests boot real Debian images, the other OSes
  // stay stand-ins (process guests).
  return withSandbox((sandbox) => sandbox.startImageMirror({ files: guests?.files, versions: OS_VERSIONS }));
}

/** Where `npm run sandbox` leaves the REST API's token for the settings it prints. */
export async function sandboxApiDir(clusterDir: string): Promise<string> {
  return (await loadSandbox()).clusterPaths(clusterDir).apiDir;
}

/** The config the rest of the service runs with: the sandbox's nodes and the mirror's images, where they run. */
export function sandboxedConfig(
  config: Config,
  cluster: { nodeAddresses: Config['nodes'] } | undefined,
  mirror: { baseUrls: Config['imageBase'] } | undefined,
): Config {
  return Object.freeze({
    ...config,
    ...(cluster ? { nodes: cluster.nodeAddresses } : {}),
    ...(mirror ? { imageBase: mirror.baseUrls } : {}),
  });
}
