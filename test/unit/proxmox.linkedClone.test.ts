import { linkedCloneSupported } from '../../lib/proxmox';
import { qmClone, qmTemplate } from '../../lib/proxmox/commands';
import { requiredPrivilege } from '../../lib/proxmox/api/privileges';

// pve-storage's volume_has_feature('clone') for a base volume, per plugin.
test.each([
  ['lvmthin', 'raw', true],
  ['zfspool', 'raw', true],
  ['zfspool', 'subvol', true],
  ['rbd', 'raw', true],
  ['zfs', 'raw', true],
  // Plugin.pm: a qcow2 overlay on the base, whatever the base's format.
  ['dir', 'qcow2', true],
  ['dir', 'raw', true],
  ['dir', 'vmdk', true],
  ['nfs', 'qcow2', true],
  ['cifs', 'raw', true],
  ['btrfs', 'subvol', true],
  ['dir', 'subvol', false],
  // Thick LVM has no clone feature; iSCSI LUNs and PBS neither.
  ['lvm', 'raw', false],
  ['iscsi', 'raw', false],
  ['iscsidirect', 'raw', false],
  ['pbs', 'raw', false],
  ['something-new', 'raw', false],
  ['constructor', 'raw', false],
])('%s with a %s base: linked clone %p', (type, format, expected) => {
  expect(linkedCloneSupported(type, format)).toBe(expected);
});

test('qm clone and qm template argv: every option its own argument, in a fixed order', () => {
  expect(qmClone(9000, 131, { name: 'web-131', full: false, pool: 'lab', description: 'owner: wf\nx' })).toEqual([
    'qm', 'clone', '9000', '131', '--name', 'web-131', '--description', 'owner: wf\nx', '--full', '0', '--pool', 'lab',
  ]);
  expect(qmClone(9000, 132, { full: true, storage: 'local', format: 'qcow2', target: 'pve2' })).toEqual([
    'qm', 'clone', '9000', '132', '--full', '1', '--storage', 'local', '--format', 'qcow2', '--target', 'pve2',
  ]);
  expect(qmTemplate(9000)).toEqual(['qm', 'template', '9000']);
  expect(qmTemplate(9000, { disk: 'scsi0' })).toEqual(['qm', 'template', '9000', '--disk', 'scsi0']);
  expect(() => qmClone(9000, 0)).toThrow(RangeError);
});

test('a bare 403 of a clone or a template names the privilege qemu-server checks', () => {
  expect(requiredPrivilege('POST', '/nodes/pve1/qemu/9000/clone', { newid: 131 })).toEqual({ privilege: 'VM.Clone (and VM.Allocate on /vms/131)', path: '/vms/9000' });
  expect(requiredPrivilege('POST', '/nodes/pve1/qemu/9000/template', {})).toEqual({ privilege: 'VM.Allocate', path: '/vms/9000' });
});
