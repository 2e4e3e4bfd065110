/**
 * Whether `qm clone` can make a linked clone of a template's disk: pve-storage's
 * `volume_has_feature($scfg, 'clone', ...)` for a base volume (what `qm template` made of
 * the disk), per storage plugin. Where it cannot, qemu-server refuses a linked clone
 * (`Linked clone feature is not supported for ...`) and only a full copy is possible.
 *
 * - Plugin.pm, the file-based storages (dir, nfs, cifs, glusterfs): a base of format
 *   qcow2, raw or vmdk; clone_image puts a qcow2 overlay on it, whichever its format.
 * - BTRFSPlugin.pm: qcow2, raw, vmdk and subvol.
 * - LvmThinPlugin.pm, ZFSPoolPlugin.pm, ZFSPlugin.pm (ZFS over iSCSI), RBDPlugin.pm:
 *   every base (their volumes are raw, or subvol on ZFS): a thin snapshot or clone.
 * - LVMPlugin.pm (thick LVM), iSCSI, iSCSI direct, PBS: never (LVM's clone feature is
 *   commented out as "fixme: add later").
 *
 * A storage type this table does not know answers no: a full clone works everywhere.
 */
const ANY = '*';

const CLONE_OF_BASE: Readonly<Record<string, readonly string[]>> = {
  dir: ['qcow2', 'raw', 'vmdk'],
  nfs: ['qcow2', 'raw', 'vmdk'],
  cifs: ['qcow2', 'raw', 'vmdk'],
  glusterfs: ['qcow2', 'raw', 'vmdk'],
  btrfs: ['qcow2', 'raw', 'vmdk', 'subvol'],
  lvmthin: [ANY],
  zfspool: [ANY],
  zfs: [ANY],
  rbd: [ANY],
  lvm: [],
  iscsi: [],
  iscsidirect: [],
  pbs: [],
};

/**
 * `storageType` as `pvesm status` or the API names it (dir, lvmthin, ...); `format` the
 * template disk's (raw, qcow2, vmdk, subvol).
 */
export function linkedCloneSupported(storageType: string, format: string): boolean {
  const formats = Object.hasOwn(CLONE_OF_BASE, storageType) ? CLONE_OF_BASE[storageType] : [];
  return formats.includes(ANY) || formats.includes(format);
}
