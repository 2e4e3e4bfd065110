/**
 * The sandbox as the service's sandbox mode uses it (app/sandbox.ts, which loads it only
 * in that mode): the one module of sandbox/ the product imports, as eslint.config.mjs
 * enforces. Tests reach the sandbox through testkit.ts and its own modules.
 */
export { realGuests, sandboxClusterOptions, sandboxTools } from './fromConfig';
export { startSandboxCluster, type SandboxCluster } from './cluster';
export { startImageMirror } from './mirror/server';
export type { SandboxToolPaths } from './requirements';
export type { GuestImages } from './qemu/images';
