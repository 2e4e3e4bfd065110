/**
 * Install throughput and cost on this machine, against the sandbox cluster and a local
 * Temporal dev server: `npm run bench -- [installs] [concurrency]` (default 20 and 5).
 * Prints latency percentiles, history events per install and the process's peak memory.
 * Figures, not assertions: compare runs on the same machine.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { loadConfig } from '../lib/config';
import { freePort, startDevServer } from '../lib/temporal/devServer';
import { ensureSshKey } from '../lib/sshKey';
import { startService } from '../lib/service';
import { startSandboxCluster } from '../sandbox/cluster';
import { startImageServer } from '../test/support/imageServer';
import { requestSse } from '../test/support/sse';
import { freePorts } from '../sandbox/testkit';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main(): Promise<void> {
  const installs = Number(process.argv[2] ?? 20);
  const concurrency = Number(process.argv[3] ?? 5);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-bench-'));
  const server = await startDevServer({ port: await freePort(), namespace: 'default', dbFile: path.join(dir, 't.db') });
  const images = await startImageServer();
  const vmSshPort = await freePort();
  const sshPortBase = await freePorts(2);
  const config = loadConfig({
    PORT: '0',
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    ALLOW_IPS: '127.0.0.1',
    VM_SSH_PORT: String(vmSshPort),
    SANDBOX_BOOT_DELAY_MS: '300',
    SANDBOX_SSH_PORT_BASE: String(sshPortBase),
    ...images.env,
  });
  const key = ensureSshKey(config.sshKeyPath);
  const sandbox = await startSandboxCluster({
    dir: path.join(dir, 'cluster'),
    vmSshPort,
    sshPortBase,
    bootDelayMs: 300,
    rootAuthorizedKey: key.publicKey,
  });
  config.nodes = sandbox.nodeAddresses;
  const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
  const bundlePath = path.join(dir, 'bundle.js');
  fs.writeFileSync(bundlePath, bundle.code);
  const service = await startService({ config, temporalAddress: server.address, mainNodeEnv: sandbox.envFor('pve1'), workflowBundlePath: bundlePath, host: '127.0.0.1' });

  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 200);
  const latencies: number[] = [];
  const historyLengths: number[] = [];
  let failures = 0;
  let next = 0;
  const t0 = Date.now();
  const oses = [['debian', '12'], ['ubuntu', '24.04'], ['rockylinux', '9']];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < installs) {
        const i = next++;
        const [osName, version] = oses[i % oses.length];
        const start = Date.now();
        const res = await requestSse(`${service.url}/api/vm/install`, { body: { os: osName, version } });
        latencies.push((Date.now() - start) / 1000);
        if (res.events.some((e) => e.status === 'error')) failures++;
        const history = await service.client.workflow.getHandle(res.headers['x-workflow-id'] as string).fetchHistory();
        historyLengths.push(history.events?.length ?? 0);
      }
    }),
  );
  const wall = (Date.now() - t0) / 1000;
  clearInterval(sampler);
  latencies.sort((a, b) => a - b);
  historyLengths.sort((a, b) => a - b);

  console.log(`installs: ${installs} at concurrency ${concurrency} on ${os.cpus().length} cores, ${failures} failed`);
  console.log(`wall time: ${wall.toFixed(1)} s, throughput ${(installs / wall).toFixed(2)} installs/s`);
  console.log(`install latency (s): p50 ${percentile(latencies, 50).toFixed(2)}  p95 ${percentile(latencies, 95).toFixed(2)}  max ${latencies.at(-1)!.toFixed(2)}`);
  console.log(`history events per install: min ${historyLengths[0]}  median ${percentile(historyLengths, 50)}  max ${historyLengths.at(-1)}`);
  console.log(`peak RSS of API + worker process: ${(peakRss / 1024 / 1024).toFixed(0)} MiB`);

  await service.stop();
  await sandbox.stop();
  await images.stop();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
