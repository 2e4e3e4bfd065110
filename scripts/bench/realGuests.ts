import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../lib/config';
import { connectTemporal } from '../../lib/temporal/connect';
import { EncryptionCodec, dataConverterFor } from '../../lib/temporal/codec';
import { resolveEncryptionKeys } from '../../lib/temporal/encryptionKeys';
import { freePort } from '../../lib/network';
import { freePorts } from '../../sandbox/testkit';
import { activitySeconds, activitySpans } from './history';
import { installBatch } from './installs';
import type { Report } from './report';
import { startBenchService } from './service';
import { benchTemplates } from './templates';
import { killVms } from '../../sandbox/state/runtime';

/**
 * `npm run bench -- --real-guests`: the figures of real guests (SANDBOX_GUESTS=qemu): how
 * long building a Debian image takes, and a cold install (the image downloaded and
 * converted for the first time) and a warm one (both cached) of Debian 12, each split
 * into boot to SSH, the init script and the reboot. The service runs as `npm start` runs
 * it. Under TCG every figure is the emulation's: compare runs on one machine.
 */
export async function benchRealGuests(root: string, report: Report): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-bench-guests-'));
  try {
    console.log('building a Debian 12 image from scratch ...');
    const b0 = Date.now();
    execFileSync('bash', [path.join(root, 'scripts', 'build-guest-image.sh'), '12'], {
      env: { ...process.env, QEMURUN_GUEST_IMAGE_CACHE: path.join(dir, 'image-cache') },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    report.add('real guests: Debian 12 image build (mmdebstrap, once per recipe)', '—', '—', `${((Date.now() - b0) / 1000).toFixed(0)} s`);
    fs.rmSync(path.join(dir, 'image-cache'), { recursive: true, force: true });

    const { service, temporal, stop } = await startRealGuestService(root, dir);
    try {
      for (const kind of ['cold', 'warm'] as const) {
        console.log(`${kind} real-guest install ...`);
        const batch = await installBatch({ url: service.url, client: temporal.client, count: 1, osIndex: 0 });
        const run = batch.runs[0];
        const spans = await activitySpans(temporal.client, run.workflowId).catch(() => []);
        const total = (name: string, nth?: number) => activitySeconds(spans, name, nth);
        report.add(`real guests: ${kind} install, debian 12`, '—', '—', `${run.seconds.toFixed(0)} s${run.ok ? '' : ' (FAILED)'}`);
        report.add('  download + stage + import', '—', '—', `${(total('downloadImage') + total('stageImage') + total('importDisk')).toFixed(1)} s`);
        report.add('  boot to SSH (first boot, cloud-init)', '—', '—', `${total('waitForSsh', 0).toFixed(0)} s`);
        report.add('  init script', '—', '—', `${total('runInitScript').toFixed(0)} s`);
        report.add('  reboot to SSH', '—', '—', `${(total('rebootVm') + total('waitForSsh', 1)).toFixed(0)} s`);
      }
    } finally {
      await stop();
    }
  } finally {
    if (!process.env.KEEP_BENCH_TMP) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `npm run bench -- --templates --real-guests`: the template figures (./templates.ts) on
 * real guests, with the images this machine has built already (scripts/build-guest-image.sh).
 */
export async function benchRealGuestTemplates(root: string, report: Report, count: number): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-bench-guests-'));
  try {
    const { service, temporal, stop } = await startRealGuestService(root, dir);
    try {
      // Under TCG an image install takes minutes: the target is for these guests.
      await benchTemplates({ url: service.url, client: temporal.client, report, guests: 'real guests', count, targetRatio: 4, timeoutMs: 60 * 60_000 });
    } finally {
      await stop();
    }
  } finally {
    if (!process.env.KEEP_BENCH_TMP) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The service on real guests, as `npm start` runs it, and a Temporal client to read its workflows. */
async function startRealGuestService(root: string, dir: string) {
  const [port, temporalPort, uiPort] = [await freePort(), await freePort(), await freePort()];
  const env: Record<string, string> = {
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    MAIN_NODE_IMAGE_DIR: path.join(dir, 'node-images'),
    ALLOW_IPS: '127.0.0.1',
    GATEWAY: '127.0.0.1',
    VM_SSH_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(uiPort),
    SANDBOX_SSH_PORT_BASE: String(await freePorts(2)),
    SANDBOX_GUESTS: 'qemu',
    SANDBOX_QEMU_IMAGES: '12',
    SSH_WAIT_TIMEOUT: '900',
    LOG_LEVEL: 'WARN',
  };
  const service = await startBenchService({ root, dir, env, port, temporalPort });
  const config = loadConfig({ ...env, DATA_DIR: service.dataDir, PORT: String(port) });
  const keys = resolveEncryptionKeys({ ...config.encryption, dataDir: service.dataDir });
  const temporal = await connectTemporal({ address: service.temporalAddress, namespace: 'default', dataConverter: dataConverterFor(new EncryptionCodec(keys)) });
  return {
    service,
    temporal,
    async stop() {
      await temporal.close();
      await service.stop();
      // The sandbox's VMs outlive the service, as a cluster's do: these were the bench's.
      killVms(path.join(service.dataDir, 'sandbox'));
    },
  };
}
