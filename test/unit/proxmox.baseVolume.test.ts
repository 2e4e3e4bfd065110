import { becomesBase, disksNotBase, isBaseVolume } from '../../lib/proxmox/baseVolume';
import { vmConfigOf } from '../../lib/proxmox/vmConfig';

// pve-storage's volume_has_feature('template') for a current volume, per plugin.
test.each([
  ['lvmthin', 'raw', true],
  ['zfspool', 'raw', true],
  ['zfs', 'raw', true],
  ['rbd', 'raw', true],
  ['dir', 'qcow2', true],
  ['dir', 'raw', true],
  ['nfs', 'vmdk', true],
  ['cifs', 'qcow2', true],
  ['btrfs', 'subvol', true],
  // Thick LVM's template feature is commented out; iSCSI LUNs and PBS have none.
  ['lvm', 'raw', false],
  ['iscsi', 'raw', false],
  ['iscsidirect', 'raw', false],
  ['pbs', 'raw', false],
  ['something-new', 'raw', false],
  ['constructor', 'raw', false],
])('%s, %s: qm template makes a base volume %p', (type, format, expected) => {
  expect(becomesBase(type, format)).toBe(expected);
});

test.each([
  ['local-lvm:base-120-disk-0', true],
  ['local-zfs:base-120-disk-1', true],
  ['local:120/base-120-disk-0.qcow2', true],
  // A template made of a linked clone keeps its base's name in front.
  ['local:100/base-100-disk-0.qcow2/120/base-120-disk-0.qcow2', true],
  ['ceph:base-100-disk-0/base-120-disk-0', true],
  ['local-lvm:vm-120-disk-0', false],
  ['local:120/vm-120-disk-0.qcow2', false],
  ['local:100/base-100-disk-0.qcow2/120/vm-120-disk-0.qcow2', false],
  // Another VM's base is not this one's.
  ['local-lvm:base-1200-disk-0', false],
])('%s is a base volume of VM 120: %p', (volid, expected) => {
  expect(isBaseVolume(volid, 120)).toBe(expected);
});

test('the disks a conversion left: disks on storages that convert, not CD-ROMs, unused disks or thick LVM', () => {
  const types: Record<string, string> = { 'local-lvm': 'lvmthin', local: 'dir', thick: 'lvm' };
  const conf = vmConfigOf({
    template: 1,
    scsi0: 'local-lvm:vm-120-disk-0,size=16G',
    scsi1: 'local:120/base-120-disk-1.qcow2,size=4G',
    efidisk0: 'local-lvm:vm-120-disk-2,efitype=4m,size=4M',
    virtio0: 'thick:vm-120-disk-3,size=8G',
    ide2: 'local-lvm:vm-120-cloudinit,media=cdrom',
    unused0: 'local-lvm:vm-120-disk-4',
    sata0: '/dev/disk/by-id/ata-foo,size=100G',
    scsi2: 'elsewhere:vm-120-disk-5,size=1G',
  });
  expect(disksNotBase(conf, 120, (s) => types[s]).map((d) => d.key).sort()).toEqual(['efidisk0', 'scsi0']);
  const done = vmConfigOf({ template: 1, scsi0: 'local-lvm:base-120-disk-0,size=16G', ide2: 'none,media=cdrom' });
  expect(disksNotBase(done, 120, (s) => types[s])).toEqual([]);
});
