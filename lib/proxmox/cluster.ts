import type { CallOptions, ProxmoxMode, ProxmoxNode } from './node';
import type { VmResource } from './pvesh';
import { NoSuchNodeError, VmNotFoundError } from './errors';

/**
 * The cluster as activities and routes see it: a node's ProxmoxNode by name, and the
 * questions only the cluster as a whole answers (where a VM lives now, which VMIDs are
 * used), each from one cluster-wide read on the main node. `qm` acts on the node it runs
 * on, so a VM is handled through the node that holds it, which a migration changes.
 */
export interface ProxmoxCluster {
  readonly mode: ProxmoxMode;
  /** The node cluster-wide reads are asked on and installs create their VMs on (MAIN_NODE). */
  readonly mainNode: string;
  /** The node, or undefined when CLI mode has no executor for it. */
  node(name: string): ProxmoxNode | undefined;
  /** The node, or NoSuchNodeError when CLI mode has no executor for it. */
  requireNode(name: string): ProxmoxNode;
  /** The main node. */
  main(): ProxmoxNode;
  /** Every guest, VMs and containers: the VMIDs in use. */
  guests(call?: CallOptions): Promise<VmResource[]>;
  /** Every QEMU VM. */
  vms(call?: CallOptions): Promise<VmResource[]>;
  /** The guest (VM or container) with this VMID, or undefined. */
  locateGuest(vmid: number, call?: CallOptions): Promise<VmResource | undefined>;
  /** The QEMU VM with this VMID (its `node` is where it lives now), or undefined. */
  locateVm(vmid: number, call?: CallOptions): Promise<VmResource | undefined>;
  /** The node holding QEMU VM `vmid`; VmNotFoundError when none does. */
  nodeOf(vmid: number, call?: CallOptions): Promise<ProxmoxNode>;
  close(): Promise<void>;
}

/** How a cluster reaches its nodes: what CLI and API mode differ in. */
export interface ClusterNodes {
  mode: ProxmoxMode;
  mainNode: string;
  node(name: string): ProxmoxNode | undefined;
  close(): Promise<void>;
}

/** The cluster-wide questions, asked of whatever reaches the nodes. */
export function proxmoxCluster(nodes: ClusterNodes): ProxmoxCluster {
  const requireNode = (name: string): ProxmoxNode => nodes.node(name) ?? throwError(NoSuchNodeError.notConfigured(name));
  const main = () => requireNode(nodes.mainNode);
  const guests = (call?: CallOptions) => main().clusterResources('vm', call);
  const locateGuest = async (vmid: number, call?: CallOptions) => (await guests(call)).find((r) => r.vmid === vmid);
  const locateVm = async (vmid: number, call?: CallOptions) => {
    const found = await locateGuest(vmid, call);
    return found?.type === 'qemu' ? found : undefined;
  };
  return {
    mode: nodes.mode,
    mainNode: nodes.mainNode,
    node: (name) => nodes.node(name),
    requireNode,
    main,
    guests,
    vms: async (call) => (await guests(call)).filter((r) => r.type === 'qemu'),
    locateGuest,
    locateVm,
    async nodeOf(vmid, call) {
      const vm = await locateVm(vmid, call);
      if (!vm) throw VmNotFoundError.notInCluster(vmid, nodes.mainNode);
      return requireNode(vm.node);
    },
    close: () => nodes.close(),
  };
}

/**
 * Runs `use` on the node holding VM `vmid`, asking `known` first: the node the caller made
 * the VM on or last moved it to, which costs no cluster-wide read. Only when the VM is not
 * there (VmNotFoundError: someone moved it since), or `known` is absent or a node this
 * worker was not given, do the cluster's resources say where it is, and `use` runs there.
 * `use` must be safe to run twice: nothing on a node that does not hold the VM changed.
 */
export async function onVmNode<T>(
  cluster: Pick<ProxmoxCluster, 'node' | 'nodeOf'>,
  vmid: number,
  known: string | undefined,
  use: (node: ProxmoxNode) => Promise<T>,
): Promise<T> {
  const node = known === undefined ? undefined : cluster.node(known);
  if (node) {
    try {
      return await use(node);
    } catch (err) {
      if (!(err instanceof VmNotFoundError)) throw err;
    }
  }
  return use(await cluster.nodeOf(vmid));
}

function throwError(err: Error): never {
  throw err;
}
