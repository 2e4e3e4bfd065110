/**
 * @qemurun/sandbox: a simulated Proxmox VE cluster (qm, pvesh, pvesm, pveum, the REST API,
 * node sshds, VMs) and an image mirror, for QemuRun's sandbox mode and tests. The one
 * module the service loads, and only in sandbox mode (app/sandbox.ts, with import()), as
 * eslint.config.mjs enforces. Tests reach the sandbox through testkit.ts and its own modules.
 *
 * It takes everything it is told as options: it reads none of the service's settings.
 */
export { startSandboxCluster, type SandboxCluster, type SandboxClusterOptions } from './cluster';
export { startImageMirror, type ImageMirror, type ImageMirrorOptions } from './mirror/server';
export { ensureSandboxTools, QEMU_GUEST_TOOLS, SANDBOX_TOOLS, type SandboxToolPaths } from './requirements';
export { prepareRealGuests, type GuestImages } from './qemu/images';
export { PVE_RELEASES, type PveRelease } from './state/model';
export { clusterPaths } from './state/paths';
export { killVms } from './state/runtime';
export { SandboxSetupError } from './setupError';
