import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, Config } from '../../lib/config';
import { freePort } from '../../lib/network';
import { ensureSshKey, SshKeyPair } from '../../lib/sshKey';
import { startService, RunningService } from '../../app/service';
import type { ReaderTiming } from '../../api/progressReader';
import { startSandboxCluster, SandboxCluster } from '../../sandbox/cluster';
import { PVE_RELEASES } from '../../sandbox/state/model';
import { startImageServer } from './imageServer';
import { prepareRealGuests } from '../../sandbox/qemu/images';
import { tokenFromDocs } from './docsToken';
import { freePorts } from '../../sandbox/testkit';
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { resolveEncryptionKeys } from '../../lib/temporal/encryptionKeys';
import { testSpawner } from './spawner';

export type ImageServer = Awaited<ReturnType<typeof startImageServer>>;

export interface Harness {
  dir: string;
  config: Config;
  key: SshKeyPair;
  sandbox: SandboxCluster;
  images: ImageServer;
  service: RunningService;
  /** Base URL of the API, e.g. http://127.0.0.1:PORT/api */
  api: string;
  stop(): Promise<void>;
}

/**
 * Everything an end-to-end test needs, all real: the sandbox cluster (qm on pve1 as a
 * local process, pve2 over a real sshd), a local image server, the service's API and
 * worker, on the Temporal dev server started once for the whole run.
 */
export async function startHarness(
  env: Record<string, string> = {},
  sandboxOptions: {
    packageOutputLines?: number;
    packageSilenceMs?: number;
    mainNodeOverSsh?: boolean;
    /** Another Temporal server than the run's dev server (the real server, realTemporal.ts). */
    temporalAddress?: string;
    /**
     * API mode: the sandbox serves the REST API too, and the service reaches the cluster
     * only through it, with the certificate pinned and the token docs/proxmox-api.md's
     * recipe makes (run as written with the sandbox's pveum): its privileges, not root's.
     */
    proxmoxApi?: boolean;
    /** false: the service runs no worker (the test runs its own, e.g. in a child process). */
    worker?: boolean;
    /** How often the API's progress readers query (default: the product's). */
    readerTiming?: ReaderTiming;
    /** Storage content other than the stock install's (SandboxClusterOptions.storageContent). */
    storageContent?: Record<string, string[]>;
    /** Resource pools the cluster has (SandboxClusterOptions.pools). */
    pools?: string[];
    /** Bridges beyond vmbr0 (SandboxClusterOptions.bridges). */
    bridges?: Record<string, string[]>;
  } = {},
): Promise<Harness> {
  const temporalAddress = sandboxOptions.temporalAddress ?? process.env.TEST_TEMPORAL_ADDRESS;
  if (!temporalAddress) throw new Error('TEST_TEMPORAL_ADDRESS unset: run through jest (globalSetup starts Temporal)');
  // TEST_PROXMOX_MODE=api runs a suite written for CLI mode in API mode.
  const apiMode = sandboxOptions.proxmoxApi ?? process.env.TEST_PROXMOX_MODE === 'api';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-e2e-'));
  // SANDBOX_GUESTS=qemu: real Debian guests, from real images built (once) on this machine.
  const realGuests = env.SANDBOX_GUESTS === 'qemu';
  const guests = realGuests ? await prepareRealGuests([...loadConfig({ ...env }).sandboxOptions.qemuImages], () => {}) : undefined;
  const images = await startImageServer({ files: guests?.files });
  const vmSshPort = await freePort();
  // One sshd per sandbox node on consecutive ports (pve1, pve2, and any set in env).
  const sshPortBase = await freePorts((env.SANDBOX_NODES ?? 'pve1,pve2').split(',').length);

  const loaded = loadConfig({
    PORT: '0',
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    // The "main node" is this machine: images staged for it stay in this harness's dir, so
    // runs side by side never share (or clean up) each other's copies.
    MAIN_NODE_IMAGE_DIR: path.join(dir, 'node-images'),
    ALLOW_IPS: '127.0.0.1',
    GATEWAY: '127.0.0.1',
    VM_SSH_PORT: String(vmSshPort),
    SSH_WAIT_TIMEOUT: '60',
    TEMPORAL_TASK_QUEUE: `qemurun-test-${process.pid}-${Date.now()}`,
    IMAGE_BASE_DEBIAN: images.baseUrls.debian,
    IMAGE_BASE_UBUNTU: images.baseUrls.ubuntu,
    IMAGE_BASE_ROCKYLINUX: images.baseUrls.rockylinux,
    SANDBOX_BOOT_DELAY_MS: '300',
    // Proxmox's 10 s, short: contention and pvestatd's lag happen, and cost little.
    SANDBOX_LOCK_TIMEOUT_MS: '1500',
    SANDBOX_STATUS_LAG_MS: '200',
    SANDBOX_SSH_PORT_BASE: String(sshPortBase),
    // A scheduled reconcile firing during a test would remove the VMs that test left on
    // purpose. The reconciler's own test turns it on.
    RECONCILE_INTERVAL: 'off',
    // Schedule tests watch runs fire every few seconds.
    SCHEDULE_MIN_INTERVAL: '10s',
    // Each test file's runs have a namespace of their own on the run's dev server
    // (./namespaces); another server (realTemporal.ts) has the namespace it made.
    ...(process.env.TEST_TEMPORAL_NAMESPACE && !sandboxOptions.temporalAddress ? { TEMPORAL_NAMESPACE: process.env.TEST_TEMPORAL_NAMESPACE } : {}),
    ...env,
  });
  const key = ensureSshKey(loaded.sshKeyPath);
  const sandbox = await startSandboxCluster({
    dir: path.join(dir, 'cluster'),
    nodes: [...loaded.sandboxOptions.nodes],
    mainNode: loaded.mainNode,
    gateway: loaded.gateway,
    vmSshPort,
    bootDelayMs: loaded.sandboxOptions.bootDelayMs,
    sshPortBase,
    rootAuthorizedKey: key.publicKey,
    packageOutputLines: sandboxOptions.packageOutputLines,
    packageSilenceMs: sandboxOptions.packageSilenceMs,
    lockTimeoutMs: loaded.sandboxOptions.lockTimeoutMs,
    statusLagMs: loaded.sandboxOptions.statusLagMs,
    // SANDBOX_PVE_VERSION=8.4 plays the last release of 8; API mode then runs its recipe.
    pveVersion: PVE_RELEASES[loaded.sandboxOptions.pveRelease],
    api: apiMode,
    guests: loaded.sandboxOptions.guests,
    guestArchive: loaded.sandboxOptions.guestArchive,
    accel: guests?.accel,
    // API mode downloads images as `import` content to `local`, as docs/proxmox-api.md configures it.
    storageContent: { local: ['backup', 'import', 'iso', 'vztmpl'], ...sandboxOptions.storageContent },
    pools: sandboxOptions.pools ?? [...loaded.sandboxOptions.pools],
    bridges: sandboxOptions.bridges,
  });
  const api = apiMode ? sandbox.api! : undefined;
  // The service talks to the sandbox's nodes, and in API mode through its REST API only.
  const config: Config = Object.freeze({
    ...loaded,
    nodes: sandbox.nodeAddresses,
    ...(api
      ? { proxmoxApi: { urls: [api.url], token: await tokenFromDocs(sandbox), fingerprint: api.fingerprint, insecure: false, imageStorage: 'local' } }
      : {}),
  });

  quietWorkerLogs();
  // The data dir's key file, made here so the service finds it instead of announcing it.
  resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
  const service = await startService({
    config,
    temporalAddress,
    mainNodeEnv: sandbox.envFor(config.mainNode),
    mainNodeOverSsh: sandboxOptions.mainNodeOverSsh,
    worker: sandboxOptions.worker,
    readerTiming: sandboxOptions.readerTiming,
    spawner: testSpawner(),
    workflowBundlePath: process.env.TEST_WORKFLOW_BUNDLE,
    host: '127.0.0.1',
  });

  return {
    dir,
    config,
    key,
    sandbox,
    images,
    service,
    api: `${service.url}/api`,
    async stop() {
      await service.stop();
      await sandbox.stop();
      await images.stop();
      if (!process.env.KEEP_TEST_TMP) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The SDK logs every worker state change at INFO and every expected activity failure of
 * the fault-injection tests at WARN; in a test run that buries the failures that matter.
 * TEST_LOG_LEVEL=INFO (or DEBUG) brings them back.
 */
function quietWorkerLogs(): void {
  try {
    Runtime.install({ logger: new DefaultLogger((process.env.TEST_LOG_LEVEL ?? 'ERROR') as LogLevel) });
  } catch {
    // Already installed (or instantiated) in this test file: keep it.
  }
}
