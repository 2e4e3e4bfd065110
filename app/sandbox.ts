import type { Config } from '../lib/config';
import type { SshKeyPair } from '../lib/sshKey';
import type { RunRecords } from '../lib/run/records';
import type { GuestImages, SandboxToolPaths } from '../sandbox';
import { reason, StartupError } from '../lib/startupError';

/**
 * Sandbox mode (no MAIN_NODE): the simulated Proxmox cluster and the built-in image
 * mirror, loaded only when used. `sandboxedConfig` puts them in place of the parts of the
 * config they stand in for.
 */

/**
 * The sandbox, loaded when sandbox mode runs. The production image leaves it out
 * (Dockerfile): there, no MAIN_NODE is a set-up error naming the fix, not a missing module.
 */
async function loadSandbox(): Promise<typeof import('../sandbox')> {
  try {
    return await import('../sandbox');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && /[/\\]sandbox['/\\]/.test(reason(err))) {
      throw new StartupError('MAIN_NODE is not set, and this build has no Proxmox sandbox to stand in for a cluster (the production image leaves it out; a checkout needs npm install with its dev dependencies): set MAIN_NODE and NODE_<name> (docs/configuration.md)', undefined, { cause: err });
    }
    throw err;
  }
}

/** Real guests' images, if SANDBOX_GUESTS=qemu (sandbox/fromConfig.ts). */
export async function realGuests(config: Config, log?: (line: string) => void): Promise<GuestImages | undefined> {
  return (await loadSandbox()).realGuests(config, log);
}

/** The programs sandbox mode needs (sandbox/fromConfig.ts). */
export async function sandboxTools(config: Config): Promise<SandboxToolPaths> {
  return (await loadSandbox()).sandboxTools(config);
}

export async function startSandbox(config: Config, key: SshKeyPair, run: RunRecords, tools: SandboxToolPaths, guests?: GuestImages) {
  const { sandboxClusterOptions, startSandboxCluster } = await loadSandbox();
  const cluster = await startSandboxCluster({ ...sandboxClusterOptions(config, key, tools, guests), api: { port: config.sandboxOptions.apiPort } });
  for (const [node, pid] of Object.entries(cluster.sshdPids)) run.record(`sandbox-sshd-${node}`, `sandbox node ${node}'s sshd`, pid);
  return cluster;
}

/** Sandbox mode's own images, unless IMAGE_BASE_* name a source: a first run needs no network. */
export async function startImages(config: Config, guests?: GuestImages) {
  if (!config.imageMirror) return undefined;
  const { startImageMirror } = await loadSandbox();
  // Real guests boot real Debian images; the other OSes stay stand-ins (process guests).
  return startImageMirror({ files: guests?.files });
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
