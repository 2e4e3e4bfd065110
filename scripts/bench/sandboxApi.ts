/**
 * `node -r ts-node/register/transpile-only scripts/bench/sandboxApi.ts`: what the sandbox's
 * REST API costs, beside the CLI way to the same state. Figures, not assertions: compare
 * runs on the same machine. Each request is a new TLS connection (as the test helper
 * makes them); a task is timed from its POST to its status `stopped`, polled every 20 ms.
 */
import { execa } from 'execa';
import { apiRequest, startTestCluster } from '../../sandbox/testkit';
import { rssBytes } from './proc';

const ms = (t0: number) => Date.now() - t0;
const pct = (v: number[], p: number) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor((p / 100) * v.length))];
const line = (what: string, v: number[]) => console.log(`${what.padEnd(44)} p50 ${String(pct(v, 50)).padStart(5)} ms   p95 ${String(pct(v, 95)).padStart(5)} ms   (n=${v.length})`);

async function main(): Promise<void> {
  const t = await startTestCluster({ api: { authFailureDelayMs: 0 } });
  const api = t.cluster.api!;
  try {
    const call = (m: string, p: string, params: Record<string, string | number> = {}) => apiRequest(api, m, p, params);
    const wait = async (upid: string) => {
      for (;;) {
        const s = (await call('GET', `/nodes/pve1/tasks/${encodeURIComponent(upid)}/status`)).body!.data as { status: string; exitstatus?: string };
        if (s.status === 'stopped') return s.exitstatus;
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const version: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t0 = Date.now();
      await call('GET', '/version');
      version.push(ms(t0));
    }
    line('GET /version', version);

    const create: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = Date.now();
      const upid = (await call('POST', '/nodes/pve1/qemu', { vmid: 300 + i, name: `bench-${i}`, memory: 512, net0: 'virtio,bridge=vmbr0' })).body!.data as string;
      if ((await wait(upid)) !== 'OK') throw new Error('create failed');
      create.push(ms(t0));
    }
    line('POST /nodes/pve1/qemu, back to back', create);

    // As in an install, where other steps come between two tasks: the spare worker is warm.
    const spaced: number[] = [];
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      const t0 = Date.now();
      const upid = (await call('POST', '/nodes/pve1/qemu', { vmid: 350 + i, name: `spaced-${i}`, memory: 512 })).body!.data as string;
      if ((await wait(upid)) !== 'OK') throw new Error('create failed');
      spaced.push(ms(t0));
    }
    line('POST /nodes/pve1/qemu, 1 s apart', spaced);

    const resources: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = Date.now();
      await call('GET', '/cluster/resources', { type: 'vm' });
      resources.push(ms(t0));
    }
    line('GET /cluster/resources?type=vm (20 VMs)', resources);

    const start: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = Date.now();
      await wait((await call('POST', `/nodes/pve1/qemu/${300 + i}/status/start`)).body!.data as string);
      start.push(ms(t0));
    }
    line('POST .../status/start, task to stopped', start);

    const cli: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = Date.now();
      await execa('qm', ['create', String(400 + i), '--name', `cli-${i}`, '--memory', '512', '--net0', 'virtio,bridge=vmbr0'], { env: t.cluster.envFor('pve1') });
      cli.push(ms(t0));
    }
    line('qm create (resident CLI server), for scale', cli);
    console.log(`API server RSS ${(rssBytes(api.pid) / 1024 / 1024).toFixed(1)} MiB`);
  } finally {
    await t.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
