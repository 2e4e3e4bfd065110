import { cliCluster } from '../../lib/proxmox';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { loadConfig } from '../../lib/config';
import { createExecutors, Spawner } from '../../lib/executor';
import { ensureSshKey } from '../../lib/sshKey';
import { freePort } from '../../lib/network';
import { createActivities } from '../../activities';
import { startSandboxCluster } from '../../sandbox/cluster';
import { freePorts } from '../../sandbox/testkit';
import { clusterPaths } from '../../sandbox/state/paths';
import { claimVmid } from '../../sandbox/state/vmlist';
import { serializeConf } from '../../sandbox/state/vmconf';
import { readCalls } from '../../sandbox/state/callLog';

export interface AllocationResult {
  taken: number;
  rangeSize: number;
  /** Milliseconds per allocation, sorted. */
  ms: number[];
  /** Sandbox CLI calls per allocation (cluster queries). */
  callsPerAllocation: number;
  /** Every allocation returned a free ID of the range. */
  allFree: boolean;
}

/**
 * The allocateVmid activity, as the worker runs it, against a sandbox cluster whose VMID
 * range (100..254) has `taken` IDs used by VMs spread over both nodes.
 */
export async function benchVmidAllocation(dir: string, taken = 150, rounds = 5): Promise<AllocationResult> {
  const vmSshPort = await freePort();
  const sshPortBase = await freePorts(2);
  const loaded = loadConfig({
    PORT: '0',
    DATA_DIR: path.join(dir, 'data'),
    SSH_KEY_PATH: path.join(dir, 'ssh', 'id_ed25519'),
    GATEWAY: '127.0.0.1',
    ALLOW_IPS: '127.0.0.1',
    VM_SSH_PORT: String(vmSshPort),
    SANDBOX_SSH_PORT_BASE: String(sshPortBase),
    ASSIGN_IP_START: '100',
    ASSIGN_IP_END: '254',
  });
  const key = ensureSshKey(loaded.sshKeyPath);
  const sandbox = await startSandboxCluster({ dir: path.join(dir, 'cluster'), vmSshPort, sshPortBase, rootAuthorizedKey: key.publicKey });
  const config = { ...loaded, nodes: sandbox.nodeAddresses };
  const executors = createExecutors(config, { spawner: new Spawner(), mainNodeEnv: sandbox.envFor(config.mainNode) });
  try {
    const { start, end } = config.vmidRange;
    const ids = Array.from({ length: end - start + 1 }, (_, i) => start + i);
    // Taken IDs scattered over the range, so the free ones are not simply the last.
    const used = ids.filter((_, i) => i % 31 !== 7).slice(0, taken);
    const paths = clusterPaths(sandbox.dir);
    used.forEach((vmid, i) => {
      const node = i % 2 === 0 ? 'pve1' : 'pve2';
      claimVmid(sandbox.dir, vmid, node);
      fs.mkdirSync(paths.qemuDir(node), { recursive: true });
      fs.writeFileSync(paths.conf(node, vmid), serializeConf({ props: { name: `busy-${vmid}`, memory: '512', cores: '1', ostype: 'l26' }, sections: '' }));
    });
    // allocateVmid needs no Temporal client; the activities factory only keeps it.
    const activities = createActivities({ config, executors, proxmox: cliCluster(executors, config.mainNode), client: undefined as unknown as Client });
    const ms: number[] = [];
    let allFree = true;
    // Once before timing: the first local command of a process starts its spawner
    // (lib/executor/spawner.ts; here through ts-node, ~0.7 s), once per process lifetime.
    await executors[config.mainNode].run(['true']);
    const callsBefore = readCalls(sandbox.dir).length;
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      // Activities heartbeat, so they run inside an activity context, as on a worker.
      const vmid = (await new MockActivityEnvironment().run(activities.allocateVmid, { exclude: [] })) as number;
      ms.push(performance.now() - t0);
      if (used.includes(vmid) || vmid < start || vmid > end) allFree = false;
    }
    const calls = readCalls(sandbox.dir).length - callsBefore;
    return { taken, rangeSize: ids.length, ms: ms.sort((a, b) => a - b), callsPerAllocation: calls / rounds, allFree };
  } finally {
    await Promise.all(Object.values(executors).map((e) => e.close()));
    await sandbox.stop();
  }
}
