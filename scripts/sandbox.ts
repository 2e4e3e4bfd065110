/**
 * `npm run sandbox`: the simulated cluster, its REST API and its image mirror alone, in a
 * process of their own. Prints, as KEY=value lines on stdout, the settings with which the
 * API and workers (QEMURUN_ROLE=api / worker, or a whole service) reach it over SSH, as a
 * deployment off a real cluster reaches its nodes; then, commented out (`# KEY=value`),
 * those of API mode (PROXMOX_API_URL, a token file, the certificate's fingerprint), which
 * replace the NODE_* lines. Runs until SIGINT/SIGTERM; its VMs keep running across its
 * restarts, as a cluster's do.
 *
 * It reads the sandbox's settings (DATA_DIR, SSH_KEY_PATH, GATEWAY, VM_SSH_PORT,
 * SANDBOX_*, IMAGE_BASE_*) and ignores MAIN_NODE and NODE_*, which it prints. It starts the
 * cluster as the service's sandbox mode does (app/sandbox.ts). A development script run from
 * its sources with ts-node, like the sandbox package it loads, it is not in dist/ nor in
 * the production image.
 */
import '../lib/dotEnv';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../lib/config';
import { ensureSshKey } from '../lib/sshKey';
import { RunRecords } from '../lib/run/records';
import { StartupError, EXIT_CRASH } from '../lib/startupError';
import { realGuests, sandboxApiDir, sandboxTools, startImages, startSandbox } from '../app/sandbox';

function sandboxSettings(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== 'MAIN_NODE' && !/^NODE_[A-Za-z0-9]/.test(k)) env[k] = v;
  return env;
}

async function main(): Promise<void> {
  const config = loadConfig(sandboxSettings());
  fs.mkdirSync(config.dataDir, { recursive: true });
  // The same records as the service's: a sandbox killed with SIGKILL left its node sshds
  // holding their ports, and a service in sandbox mode on this DATA_DIR would share them.
  const run = new RunRecords(path.join(config.dataDir, 'run'));
  run.claim();
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops) await stop().catch((err) => console.error('shutdown step failed:', err));
    run.release();
  };
  try {
    for (const line of await run.stopLeftovers()) console.error(line);
    const tools = await sandboxTools(config);
    const key = ensureSshKey(config.sshKeyPath);
    const guests = await realGuests(config, (line) => console.error(line));
    const cluster = await startSandbox(config, key, run, tools, guests);
    const api = cluster.api!;
    run.record('sandbox-api', "the sandbox's REST API server", api.pid);
    stops.push(async () => {
      await cluster.stop({ keepVms: true });
      for (const node of Object.keys(cluster.sshdPids)) run.forget(`sandbox-sshd-${node}`);
      run.forget('sandbox-api');
    });
    const mirror = await startImages(config, guests);
    if (mirror) stops.push(() => mirror.stop());

    const settings: Record<string, string> = {
      MAIN_NODE: cluster.mainNode,
      ...Object.fromEntries(Object.entries(cluster.nodeAddresses).map(([n, a]) => [`NODE_${n}`, `${a.host}:${a.port}`])),
      GATEWAY: config.gateway,
      ASSIGN_STORAGE: config.storage,
      VM_SSH_PORT: String(config.vmSshPort),
      SSH_KEY_PATH: path.resolve(config.sshKeyPath),
      // Where images are copied "on the main node": this machine, so a directory of the sandbox's.
      MAIN_NODE_IMAGE_DIR: path.join(cluster.dir, 'node-images'),
      ...(mirror
        ? mirror.env
        : { IMAGE_BASE_DEBIAN: config.imageBase.debian, IMAGE_BASE_UBUNTU: config.imageBase.ubuntu, IMAGE_BASE_ROCKYLINUX: config.imageBase.rockylinux }),
      // Real guests' apt-get goes through the sandbox's archive proxy.
      ...(config.initScript.mirror ? { INIT_MIRROR: config.initScript.mirror } : {}),
      // Callers on this machine may install: the API refuses everyone else by default.
      ALLOW_IPS: '127.0.0.1,::1',
    };
    console.error(
      `*** Proxmox sandbox: nodes ${Object.keys(cluster.nodeAddresses).join(', ')} (state in ${cluster.dir})` +
        `${mirror ? `, image mirror at ${mirror.origin}` : ''}. Settings for the API and workers: ***`,
    );
    // API mode: the same settings with these instead of NODE_* (and MAIN_NODE_IMAGE_DIR,
    // which API mode does not use). The token is given as a file, so no secret is printed.
    const tokenFile = path.join(await sandboxApiDir(cluster.dir), 'token');
    fs.writeFileSync(tokenFile, `${api.token.tokenid}=${api.token.secret}\n`, { mode: 0o600 });
    const apiSettings: Record<string, string> = {
      PROXMOX_API_URL: api.url,
      PROXMOX_API_TOKEN_FILE: tokenFile,
      PROXMOX_API_FINGERPRINT: api.fingerprint,
    };
    console.log(Object.entries(settings).map(([k, v]) => `${k}=${v}`).join('\n'));
    console.log(
      [
        `# API mode instead (${api.token.tokenid}'s token; no node is reached over SSH): these three in place of the NODE_* lines`,
        ...Object.entries(apiSettings).map(([k, v]) => `# ${k}=${v}`),
      ].join('\n'),
    );
    console.error('*** ready; Ctrl-C stops the nodes (running VMs keep running) ***');
  } catch (err) {
    await stopAll();
    throw err;
  }

  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    await stopAll();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}

main().catch((err) => {
  if (err instanceof StartupError) {
    console.error(`qemurun sandbox: ${err.message}`);
    process.exit(err.exitCode);
  }
  console.error(err);
  process.exit(EXIT_CRASH);
});
