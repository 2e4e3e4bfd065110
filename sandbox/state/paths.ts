import path from 'node:path';

/**
 * Where everything lives in a sandbox cluster directory. The Proxmox part mirrors pmxcfs
 * (/etc/pve): `nodes/<node>/qemu-server/<vmid>.conf`. Everything the real cluster keeps
 * elsewhere (storage contents, running QEMU processes, guests' disks) sits beside it, so
 * one directory is the whole cluster and removing it removes everything.
 */
export function clusterPaths(dir: string) {
  const root = path.resolve(dir);
  const side = path.join(root, 'sandbox');
  return {
    root,
    nodeDir: (node: string) => path.join(root, 'nodes', node),
    qemuDir: (node: string) => path.join(root, 'nodes', node, 'qemu-server'),
    conf: (node: string, vmid: number) => path.join(root, 'nodes', node, 'qemu-server', `${vmid}.conf`),
    /** The path Proxmox prints in its errors: relative to /etc/pve. */
    confDisplay: (node: string, vmid: number) => `nodes/${node}/qemu-server/${vmid}.conf`,
    clusterJson: path.join(side, 'cluster.json'),
    /** Cluster-wide VMID ownership, like pmxcfs's vmlist: one file per VMID naming its node. */
    vmlistDir: path.join(side, 'vmlist'),
    vmlistEntry: (vmid: number) => path.join(side, 'vmlist', String(vmid)),
    locksDir: path.join(side, 'locks'),
    /**
     * When a VM became a template (the file's mtime): pvestatd reports the config's
     * `template` a status cycle later, so /cluster/resources lags it (../cli/resources.ts).
     */
    templatedAt: (vmid: number) => path.join(side, 'templated', String(vmid)),
    /** Pool membership, as user.cfg's `pool:` lines hold it: one file per member VMID. */
    poolDir: (pool: string) => path.join(side, 'pools', encodeURIComponent(pool)),
    volumesDir: (node: string, storage: string) => path.join(side, 'storage', node, storage),
    /** Files of a file-based storage's non-disk content (`import/`, `iso/`): real bytes. */
    contentDir: (node: string, storage: string, content: string) => path.join(side, 'content', node, storage, content),
    /** REST API: its certificate, tokens and port; task logs as /var/log/pve/tasks. */
    apiDir: path.join(side, 'api'),
    tasksDir: path.join(side, 'tasks'),
    faults: path.join(side, 'faults.json'),
    callLog: path.join(side, 'calls.jsonl'),
    runDir: path.join(side, 'run'),
    pidFile: (vmid: number) => path.join(side, 'run', `${vmid}.pid`),
    /** The DHCP stand-in's leases (./dhcp.ts), one per MAC address, as dnsmasq keeps them. */
    dhcpLeases: path.join(side, 'dhcp', 'leases.json'),
    /** What a running process guest's stand-in agent reports (./dhcp.ts): written once it has booted. */
    guestNetwork: (vmid: number) => path.join(root, 'guests', String(vmid), 'network.json'),
    guestDir: (vmid: number) => path.join(root, 'guests', String(vmid)),
    guestRoot: (vmid: number) => path.join(root, 'guests', String(vmid), 'root'),
    guestLog: (vmid: number) => path.join(root, 'guests', String(vmid), 'privileged.log'),
    guestConsole: (vmid: number) => path.join(root, 'guests', String(vmid), 'console.log'),
    guestHostKey: (vmid: number) => path.join(root, 'guests', String(vmid), 'ssh_host_ed25519_key'),
    /**
     * Real guests (SANDBOX_GUESTS=qemu): a volume's contents, as a storage plugin's path()
     * answers it (`images/<vmid>/vm-<vmid>-disk-0.qcow2` on dir, a device-like file on lvmthin).
     */
    volumeData: (node: string, storage: string, volname: string) => path.join(side, 'disks', node, storage, volname),
    /** QEMU's sockets, as /var/run/qemu-server/<vmid>.qmp, .qga and .serial0. */
    qmpSocket: (vmid: number) => path.join(side, 'run', `${vmid}.qmp`),
    qgaSocket: (vmid: number) => path.join(side, 'run', `${vmid}.qga`),
    serialSocket: (vmid: number) => path.join(side, 'run', `${vmid}.serial0`),
    /** The archive proxy real guests reach Debian's package archive through. */
    archiveSocket: path.join(side, 'run', 'archive.sock'),
  };
}

export type ClusterPaths = ReturnType<typeof clusterPaths>;
