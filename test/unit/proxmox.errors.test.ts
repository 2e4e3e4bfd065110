import { FAILURE_TYPES, NON_RETRYABLE_ERRORS } from '../../contract';
import {
  BridgeNotFoundError,
  LockTimeoutError,
  NicMtuError,
  NoSuchNodeError,
  ParameterError,
  ProxmoxCommandError,
  StorageError,
  StorageLockError,
  VmLockedError,
  VmNotFoundError,
  VmStateError,
  PermissionDeniedError,
  VmidTakenError,
  classifyFailure,
} from '../../lib/proxmox/errors';

const failure = (stderr: string, extra: { stdout?: string; exitCode?: number; command?: string } = {}) =>
  classifyFailure({ node: 'pve1', command: extra.command ?? 'qm x 100', exitCode: extra.exitCode ?? 255, stderr, stdout: extra.stdout });

describe('classifyFailure (the texts Proxmox prints)', () => {
  it.each([
    ["unable to create VM 9000 - VM 9000 already exists on node 'pve1'\n", VmidTakenError, false],
    ["unable to create VM 108 - CT 108 already exists on node 'proxmox'\n", VmidTakenError, false],
    ['unable to create VM 201: config file already exists\n', VmidTakenError, false],
    ['400 Parameter verification failed.\nvmid: VM 100 already exists\n', VmidTakenError, false],
    // clone_vm onto a VMID another node holds: pmxcfs refuses its config's rename (pve-cluster
    // memdb.c memdb_rename); without quorum /etc/pve is read-only, which passes.
    ["close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/201.conf' failed: File exists\n", VmidTakenError, false],
    ["close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/201.conf' failed: Permission denied\n", ProxmoxCommandError, true],
    ["Configuration file 'nodes/hv02/qemu-server/101.conf' does not exist\n", VmNotFoundError, false],
    ["unable to find configuration file for VM 101 on node 'pve1'\n", VmNotFoundError, false],
    ['VM is locked (create)\n', VmLockedError, true],
    ['VM is locked (migrate)\n', VmLockedError, true],
    ["can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout\n", LockTimeoutError, true],
    ["no such cluster node 'pve9'\n", NoSuchNodeError, false],
    ["storage 'foo' does not exist\n", StorageError, false],
    ["unable to create VM 100 - storage 'foo' is disabled\n", StorageError, false],
    ["storage 'local-lvm' is not available on node 'pve2'\n", StorageError, false],
    ['storage local does not support vm images\n', StorageError, false],
    // pve-storage PVE/API2/Storage/Status.pm: download_url, read_status.
    ["500 storage 'local' is not configured for content-type 'import'\n", StorageError, false],
    ['400 Parameter verification failed.\nstorage: No such storage.\n', StorageError, false],
    // pve-manager PVE/HTTPServer.pm: a revoked, expired or wrong token.
    ['401 Authentication failed!\n', PermissionDeniedError, false],
    ['401 No ticket\n', PermissionDeniedError, false],
    ["400 Parameter verification failed.\nvmid: type check ('integer') failed - got ''\nqm set <vmid> [OPTIONS]\n", ParameterError, false],
    ['400 Parameter verification failed.\nname: invalid format - value does not look like a valid DNS name\n', ParameterError, false],
    ['400 too many arguments\nqm set <vmid> [OPTIONS]\n', ParameterError, false],
    ['400 not enough arguments\nqm create <vmid> [OPTIONS]\n', ParameterError, false],
    ['no options specified\n', ParameterError, false],
    ['shrinking disks is not supported\n', ParameterError, false],
    ["/tmp/x.qcow2: non-existent or non-regular file\n", ParameterError, false],
    ['VM 100 already running\n', VmStateError, false],
    ['VM 100 not running\n\nVM 100 not running\n', VmStateError, false],
    ['VM 100 is running - destroy failed\n', VmStateError, false],
    ["can't migrate running VM without --online\n", VmStateError, false],
    ['start failed: QEMU exited with code 1\n', ProxmoxCommandError, true],
    // qm start (and the start task's log): pve-bridge's ifup script, then vm_start's error.
    [
      "bridge 'vmbr9' does not exist\nkvm: -netdev type=tap,id=net0,ifname=tap241i0,script=/usr/libexec/qemu-server/pve-bridge,downscript=/usr/libexec/qemu-server/pve-bridgedown,vhost=on: network script /usr/libexec/qemu-server/pve-bridge failed with status 512\nstart failed: QEMU exited with code 1\n",
      BridgeNotFoundError,
      false,
    ],
    ["start failed: QEMU exited with code 1\nbridge 'vmbr9' does not exist\n", BridgeNotFoundError, false],
    // qemu-server's print_netdevice_full, before QEMU runs: an mtu the bridge cannot carry.
    [
      "netdev net0: MTU '9000' is bigger than the bridge MTU '1500' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.\n",
      NicMtuError,
      false,
    ],
    ["netdev net0: MTU '575' is smaller than the IP minimum MTU '576'\n", NicMtuError, false],
    // qemu-server clone_vm and template, pve-storage cluster_lock_storage (local, then shared).
    ["clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout\n", StorageLockError, true],
    ["clone failed: cfs-lock 'storage-nfs-vm' error: got lock request timeout\n", StorageLockError, true],
    ["you can't convert a template to a template\n", VmStateError, false],
    ["you can't convert a VM to template if VM is running\n", VmStateError, false],
    ["Linked clone feature is not supported for 'local-lvm:vm-303-disk-0' (scsi0)\n", StorageError, false],
    ["can't clone VM to node 'pve2' (VM uses local storage)\n", StorageError, false],
    ["parameter 'storage' not allowed for linked clones\n", ParameterError, false],
    ['cluster not ready - no quorum?\n', ProxmoxCommandError, true],
    ['', ProxmoxCommandError, true],
  ] as const)('%j → %p', (stderr, ErrorType, retryable) => {
    const err = failure(stderr);
    expect(err).toBeInstanceOf(ErrorType);
    expect(err.name).toBe(ErrorType.name);
    expect(err.retryable).toBe(retryable);
  });

  it('reads a failed migration from stdout, where the task printed its reason', () => {
    const err = failure('migration aborted\n', {
      stdout: "2025-03-01 12:00:00 ERROR: migration aborted (duration 00:00:01): storage 'local-lvm' is not available on node 'pve2'\n",
    });
    expect(err).toBeInstanceOf(StorageError);
  });

  it('carries command, exit code and stderr, and a short message for the UI', () => {
    const err = failure('400 Parameter verification failed.\nname: invalid format\nqm create <vmid> [OPTIONS]\n', {
      exitCode: 2,
      command: 'qm create 100 --name bad_name',
    });
    expect(err).toMatchObject({ node: 'pve1', command: 'qm create 100 --name bad_name', exitCode: 2 });
    expect(err.stderr).toContain('qm create <vmid> [OPTIONS]');
    expect(err.message).toBe(
      "qm create 100 --name bad_name failed on node 'pve1' (exit 2): 400 Parameter verification failed.; name: invalid format",
    );
  });

  it('exposes the lock value and the node owning a taken VMID', () => {
    expect((failure('VM is locked (backup)\n') as VmLockedError).lock).toBe('backup');
    expect((failure("unable to create VM 9000 - VM 9000 already exists on node 'pve2'\n") as VmidTakenError).ownerNode).toBe('pve2');
    expect((failure("clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout\n") as StorageLockError).storage).toBe('local-lvm');
    expect((failure("clone failed: cfs-lock 'storage-nfs-vm' error: got lock request timeout\n") as StorageLockError).storage).toBe('nfs-vm');
  });

  it('takes whether a class is retryable from the one table the workflows use', () => {
    const all = [VmidTakenError, VmNotFoundError, ParameterError, StorageError, NoSuchNodeError, VmStateError, PermissionDeniedError, VmLockedError, LockTimeoutError, StorageLockError, ProxmoxCommandError];
    for (const E of all) {
      const err = new E({ node: 'n', command: 'c', exitCode: 1, stderr: '' });
      expect(Object.keys(FAILURE_TYPES)).toContain(err.name);
      expect(NON_RETRYABLE_ERRORS.includes(err.name)).toBe(!err.retryable);
    }
  });
});

describe('the hint of a missing bridge names where the bridge came from', () => {
  const missing = classifyFailure({ node: 'pve1', command: 'qm start 120', exitCode: 255, stderr: "bridge 'vmbr7' does not exist\n" });

  test('VM_BRIDGE by default; the install\'s `bridge` field when the VM\'s bridge came from the request', () => {
    expect(missing).toBeInstanceOf(BridgeNotFoundError);
    const err = missing as BridgeNotFoundError;
    expect(err.bridge).toBe('vmbr7');
    expect(err.message).toMatch(/; to fix: set VM_BRIDGE to a bridge node 'pve1' has, or create 'vmbr7' there \(System → Network\)$/);
    const fromRequest = err.fromRequest();
    expect(fromRequest).toBeInstanceOf(BridgeNotFoundError);
    expect(fromRequest.message).toMatch(/; to fix: name a bridge node 'pve1' has in the install's `bridge` field \(or in the VM's net0\), or create 'vmbr7' there \(System → Network\)$/);
    expect(fromRequest.message).not.toMatch(/VM_BRIDGE/);
    expect(fromRequest.retryable).toBe(false);
  });

  test('the bridge is read where qm prints it: the ifup script\'s line is on stdout', () => {
    const err = classifyFailure({
      node: 'pve1',
      command: 'qm start 120',
      exitCode: 255,
      stderr: 'start failed: QEMU exited with code 1\n',
      stdout: "bridge 'vmbr7' does not exist\nkvm: -netdev type=tap,id=net0,ifname=tap120i0: network script /usr/libexec/qemu-server/pve-bridge failed with status 512\n",
    }) as BridgeNotFoundError;
    expect(err.bridge).toBe('vmbr7');
    expect(err.message).toMatch(/or create 'vmbr7' there/);
  });

  test('an mtu above the bridge\'s names the `mtu` field', () => {
    const err = classifyFailure({ node: 'pve1', command: 'qm start 120', exitCode: 255, stderr: "netdev net0: MTU '9000' is bigger than the bridge MTU '1500' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.\n" });
    expect(err.message).toMatch(/to fix: install with an `mtu` no larger than the bridge's MTU on node 'pve1'/);
  });
});
