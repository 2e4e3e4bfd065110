import type { CommandResult, NodeExecutor, RunOptions } from '../../lib/executor/types';
import { apiCluster, cliCluster, onVmNode, proxmoxCluster, type ProxmoxNode } from '../../lib/proxmox';
import { PveApi } from '../../lib/proxmox/api/http';
import { NoSuchNodeError, VmNotFoundError } from '../../lib/proxmox/errors';
import type { VmResource } from '../../lib/proxmox/pvesh';
import { startPveApiStub, type PveApiStub } from '../support/pveApiStub';

/** The cluster's guests as /cluster/resources lists them: VM 120 on pve2, container 130 on pve1. */
const RESOURCES = [
  { id: 'qemu/120', type: 'qemu', vmid: 120, name: 'web-120', node: 'pve2', status: 'running', template: 0, tags: 'debian' },
  { id: 'lxc/130', type: 'lxc', vmid: 130, name: 'ct', node: 'pve1', status: 'running', template: 0 },
  { id: 'qemu/140', type: 'qemu', vmid: 140, name: 'far-140', node: 'pve9', status: 'stopped', template: 0 },
];

/** A node that answers the cluster-wide read and counts how often it was asked. */
function stubNode(name: string): ProxmoxNode & { reads: number } {
  const node = {
    node: name,
    mode: 'cli' as const,
    reads: 0,
    async clusterResources(type: string) {
      node.reads++;
      expect(type).toBe('vm');
      return RESOURCES.map((r) => ({ ...r, template: false, tags: r.tags ? [r.tags] : [] })) as VmResource[];
    },
  };
  return node as unknown as ProxmoxNode & { reads: number };
}

describe('ProxmoxCluster on stub nodes', () => {
  const pve1 = stubNode('pve1');
  const pve2 = stubNode('pve2');
  const cluster = proxmoxCluster({
    mode: 'cli',
    mainNode: 'pve1',
    node: (name) => ({ pve1, pve2 })[name as 'pve1' | 'pve2'],
    close: async () => {},
  });

  beforeEach(() => {
    pve1.reads = 0;
    pve2.reads = 0;
  });

  it('asks the main node, once per question', async () => {
    expect(cluster.main()).toBe(pve1);
    expect((await cluster.locateVm(120))?.node).toBe('pve2');
    expect(pve1.reads).toBe(1);
    expect(pve2.reads).toBe(0);
  });

  it('locates a VM where it lives now, and its node', async () => {
    expect(await cluster.locateVm(120)).toEqual(expect.objectContaining({ vmid: 120, node: 'pve2', name: 'web-120', tags: ['debian'] }));
    expect(await cluster.nodeOf(120)).toBe(pve2);
  });

  it('does not take a container for a VM, but knows its VMID is used', async () => {
    expect(await cluster.locateVm(130)).toBeUndefined();
    expect(await cluster.locateGuest(130)).toEqual(expect.objectContaining({ type: 'lxc', node: 'pve1' }));
    expect((await cluster.guests()).map((g) => g.vmid)).toEqual([120, 130, 140]);
    expect((await cluster.vms()).map((g) => g.vmid)).toEqual([120, 140]);
  });

  it('answers a VM no node holds with VmNotFoundError, the failure type the API answers 404', async () => {
    expect(await cluster.locateVm(999)).toBeUndefined();
    const err = await cluster.nodeOf(999).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VmNotFoundError);
    expect((err as Error).constructor.name).toBe('VmNotFoundError');
    expect((err as Error).message).toBe('VM 999 does not exist in the cluster');
    expect((err as VmNotFoundError).retryable).toBe(false);
  });

  it('runs on the node the caller knows without reading the cluster, and looks the VM up only when it is not there', async () => {
    const notHere = (n: ProxmoxNode) => new VmNotFoundError({ node: n.node, command: 'qm config 120', exitCode: 2, stderr: `Configuration file 'nodes/${n.node}/qemu-server/120.conf' does not exist` });
    const asked: string[] = [];
    const use = async (n: ProxmoxNode) => {
      asked.push(n.node);
      if (n.node !== 'pve2') throw notHere(n);
      return n.node;
    };
    expect(await onVmNode(cluster, 120, 'pve2', use)).toBe('pve2');
    expect([asked, pve1.reads]).toEqual([['pve2'], 0]);
    // Moved since the caller put it on pve1: the cluster's resources find it on pve2.
    asked.length = 0;
    expect(await onVmNode(cluster, 120, 'pve1', use)).toBe('pve2');
    expect([asked, pve1.reads]).toEqual([['pve1', 'pve2'], 1]);
    // No node known, or one this worker cannot reach: the cluster's resources, as before.
    asked.length = 0;
    expect(await onVmNode(cluster, 120, undefined, use)).toBe('pve2');
    expect(await onVmNode(cluster, 120, 'pve9', use)).toBe('pve2');
    expect([asked, pve1.reads]).toEqual([['pve2', 'pve2'], 3]);
    // Any other failure is the answer: the VM is there, and the operation failed.
    const locked = onVmNode(cluster, 120, 'pve2', async () => {
      throw new Error('VM is locked (migrate)');
    });
    await expect(locked).rejects.toThrow('VM is locked (migrate)');
    expect(pve1.reads).toBe(3);
  });

  it('answers a VM on a node it cannot reach with NoSuchNodeError naming the node', async () => {
    const err = await cluster.nodeOf(140).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoSuchNodeError);
    expect((err as Error).message).toBe("node 'pve9' is not configured");
    expect(cluster.node('pve9')).toBeUndefined();
    expect(() => cluster.requireNode('pve9')).toThrow(NoSuchNodeError);
  });
});

/** A node whose pvesh prints the resources above, and nothing else. */
class PveshExecutor implements NodeExecutor {
  readonly calls: string[][] = [];
  constructor(readonly node: string) {}
  async run(argv: readonly string[], _opts: RunOptions = {}): Promise<CommandResult> {
    this.calls.push([...argv]);
    if (argv[0] === 'pvesh' && argv.includes('/cluster/resources')) return { stdout: JSON.stringify(RESOURCES), stderr: '', exitCode: 0 };
    return { stdout: '', stderr: `unexpected: ${argv.join(' ')}`, exitCode: 255 };
  }
  async close(): Promise<void> {}
}

describe('ProxmoxCluster in CLI mode', () => {
  it('reads pvesh on the main node and hands out the node that holds the VM', async () => {
    const executors = { pve1: new PveshExecutor('pve1'), pve2: new PveshExecutor('pve2') };
    const cluster = cliCluster(executors, 'pve1');
    const node = await cluster.nodeOf(120);
    expect(node.node).toBe('pve2');
    expect(node.mode).toBe('cli');
    expect(executors.pve1.calls).toEqual([expect.arrayContaining(['pvesh', 'get', '/cluster/resources'])]);
    expect(executors.pve2.calls).toEqual([]);
    await expect(cluster.nodeOf(140)).rejects.toThrow("node 'pve9' is not configured");
  });

  it('refuses a main node it has no executor for', () => {
    expect(() => cliCluster({}, 'pve1').main()).toThrow(NoSuchNodeError);
  });
});

describe('ProxmoxCluster in API mode', () => {
  let stub: PveApiStub;
  let api: PveApi;

  beforeAll(async () => {
    stub = await startPveApiStub();
    stub.route('GET /cluster/resources', (req) => ({ data: RESOURCES.filter(() => req.query.get('type') === 'vm') }));
    api = new PveApi({ urls: [stub.url], token: 'qemurun@pve!test=8f6c2b9e-3d41-4a57-9b0e-5e2d6f1a7c33', fingerprint: stub.fingerprint });
  });

  afterAll(async () => {
    api.close();
    await stub.close();
  });

  it('reaches every node through the API, so a VM on any node is found', async () => {
    const cluster = apiCluster(api, 'pve1');
    expect((await cluster.nodeOf(140)).node).toBe('pve9');
    expect((await cluster.nodeOf(120)).mode).toBe('api');
    await expect(cluster.nodeOf(999)).rejects.toBeInstanceOf(VmNotFoundError);
    expect(stub.requests.filter((r) => r.path === '/cluster/resources')).toHaveLength(3);
  });
});
