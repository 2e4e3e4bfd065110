import type { VmConfig, VmDisk } from './vmConfig';

/**
 * What `qm template` makes of a VM's disks (qemu-server QemuServer.pm `template_create`):
 * each disk, CD-ROMs aside, whose volume has pve-storage's `template` feature becomes a
 * base volume through its plugin's `create_base`, `vm-<vmid>-disk-N` renamed
 * `base-<vmid>-disk-N` (`<vmid>/base-<vmid>-disk-N.qcow2` on a file storage; a linked
 * clone's keeps its base's name in front: `100/base-100-disk-0.qcow2/101/base-101-disk-0.qcow2`,
 * `base-100-disk-0/base-101-disk-0`). Proxmox writes `template: 1` into the config before
 * it converts them, and the conversion can fail after that (a storage lock's timeout), so
 * only the disks' volume names say a template is finished.
 *
 * The `template` feature of a current volume, by plugin (`volume_has_feature`):
 * - Plugin.pm, the file-based storages (dir, nfs, cifs, glusterfs), and BTRFSPlugin.pm:
 *   formats qcow2, raw, vmdk and subvol.
 * - LvmThinPlugin.pm, ZFSPoolPlugin.pm, ZFSPlugin.pm (ZFS over iSCSI), RBDPlugin.pm: any.
 * - LVMPlugin.pm (thick LVM; the feature is commented out there), iSCSI, iSCSI direct, PBS:
 *   none. Their disks stay as they are, and the VM is a template all the same.
 *
 * A storage type this table does not know is taken to convert nothing, as ./linkedClone
 * takes it to clone nothing: an install then copies such a template's disk in full, which
 * works whatever its name.
 */
const ANY = '*';

const TEMPLATE_OF_CURRENT: Readonly<Record<string, readonly string[]>> = {
  dir: ['qcow2', 'raw', 'vmdk', 'subvol'],
  nfs: ['qcow2', 'raw', 'vmdk', 'subvol'],
  cifs: ['qcow2', 'raw', 'vmdk', 'subvol'],
  glusterfs: ['qcow2', 'raw', 'vmdk', 'subvol'],
  btrfs: ['qcow2', 'raw', 'vmdk', 'subvol'],
  lvmthin: [ANY],
  zfspool: [ANY],
  zfs: [ANY],
  rbd: [ANY],
};

/** Whether `qm template` turns a disk of this storage type and format into a base volume. */
export function becomesBase(storageType: string, format: string): boolean {
  const formats = Object.hasOwn(TEMPLATE_OF_CURRENT, storageType) ? TEMPLATE_OF_CURRENT[storageType] : [];
  return formats.includes(ANY) || formats.includes(format);
}

/** Whether a volume ID is a base volume of `vmid`: its last part `base-<vmid>-disk-N`. */
export function isBaseVolume(volid: string, vmid: number): boolean {
  const volname = volid.slice(volid.indexOf(':') + 1);
  return new RegExp(`(?:^|/)base-${vmid}-disk-\\d+(?:\\.[a-z0-9]+)?$`).test(volname);
}

/** The format of a disk: its `format=` option, else its volume's extension, else raw. */
export function diskFormat(disk: VmDisk): string {
  return disk.options.format ?? /\.(qcow2|raw|vmdk)$/.exec(disk.volid)?.[1] ?? 'raw';
}

/**
 * The disks `qm template` converts that are no base volumes of `vmid` yet (an unfinished
 * or failed conversion): every disk on a storage volume but CD-ROMs and `unusedN`, as
 * template_create's `foreach_volume` goes, whose storage type (`storageType`, undefined
 * when unknown) has the feature. Empty for a finished template.
 */
export function disksNotBase(conf: Pick<VmConfig, 'disks'>, vmid: number, storageType: (storage: string) => string | undefined): VmDisk[] {
  return conf.disks.filter((d) => {
    if (d.cdrom || /^unused\d+$/.test(d.key) || !/^[^/:]+:/.test(d.volid)) return false;
    if (isBaseVolume(d.volid, vmid)) return false;
    const type = storageType(d.volid.slice(0, d.volid.indexOf(':')));
    return type !== undefined && becomesBase(type, diskFormat(d));
  });
}

/** The volume IDs of disks that are no base volumes, for a message: `scsi0 (local-lvm:vm-120-disk-0)`. */
export function describeDisks(disks: readonly VmDisk[]): string {
  return disks.map((d) => `${d.key} (${d.volid})`).join(', ');
}
