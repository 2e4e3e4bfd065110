import path from 'node:path';
import type { Config } from '../lib/config';
import type { SshKeyPair } from '../lib/sshKey';
import type { RunRecords } from '../lib/run/records';
import type { SandboxToolPaths } from '../sandbox/requirements';

/**
 * Sandbox mode (no MAIN_NODE): the simulated Proxmox cluster and the built-in image
 * mirror, loaded only when used. Each rewrites the part of the config it stands in for.
 */

/** The simulated cluster as the settings describe it: shared by the service and `npm run sandbox`. */
export function sandboxClusterOptions(config: Config, key: SshKeyPair, tools: SandboxToolPaths) {
  return {
    dir: path.join(config.dataDir, 'sandbox'),
    nodes: config.sandboxOptions.nodes,
    mainNode: config.mainNode,
    gateway: config.gateway,
    vmSshPort: config.vmSshPort,
    bootDelayMs: config.sandboxOptions.bootDelayMs,
    packageSilenceMs: config.sandboxOptions.packageSilenceMs,
    sshPortBase: config.sandboxOptions.sshPortBase,
    rootAuthorizedKey: key.publicKey,
    sshdPath: tools.sshd,
    pveVersions: config.sandboxOptions.pveVersions,
  };
}

export async function startSandbox(config: Config, key: SshKeyPair, run: RunRecords, tools: SandboxToolPaths) {
  const { startSandboxCluster } = await import('../sandbox/cluster');
  const cluster = await startSandboxCluster({ ...sandboxClusterOptions(config, key, tools), api: { port: config.sandboxOptions.apiPort } });
  for (const [node, pid] of Object.entries(cluster.sshdPids)) run.record(`sandbox-sshd-${node}`, `sandbox node ${node}'s sshd`, pid);
  // The nodes the rest of the service talks to are the sandbox's.
  config.nodes = cluster.nodeAddresses;
  return cluster;
}

/** Sandbox mode's own images, unless IMAGE_BASE_* name a source: a first run needs no network. */
export async function startImages(config: Config) {
  if (!config.imageMirror) return undefined;
  const { startImageMirror } = await import('../sandbox/mirror/server');
  const mirror = await startImageMirror();
  config.imageBase = mirror.baseUrls;
  return mirror;
}
