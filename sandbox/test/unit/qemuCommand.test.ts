import { parseConf } from '../../state/vmconf';
import { qemuCommand, type EfiVars, type GuestDisk } from '../../qemu/command';

/**
 * The machine, firmware and disks of a real guest's QEMU command line, for configs as an
 * install writes them (activities/vm.ts), checked against what qemu-server's
 * config_to_command gives the same config, without booting anything.
 */

const BASE = `agent: 1
boot: order=scsi0
cores: 2
ide2: local-lvm:vm-130-cloudinit,media=cdrom
memory: 2048
name: efi-130
net0: virtio=BC:24:11:AA:0B:1D,bridge=vmbr0
scsi0: local-lvm:vm-130-disk-0,size=8G
scsihw: virtio-scsi-pci
serial0: socket
`;

const DISKS: GuestDisk[] = [
  { key: 'scsi0', file: '/d/vm-130-disk-0', format: 'raw', cdrom: false },
  { key: 'ide2', file: '/d/vm-130-cloudinit', format: 'raw', cdrom: true },
];

function command(conf: string, opts: { disks?: GuestDisk[]; efiVars?: EfiVars } = {}): string[] {
  return qemuCommand({
    vmid: 130,
    conf: parseConf(conf),
    disks: opts.disks ?? DISKS,
    efiVars: opts.efiVars,
    accel: 'tcg',
    qmpSocket: '/r/130.qmp',
    qgaSocket: '/r/130.qga',
    serialSocket: '/r/130.serial0',
    serialLog: '/g/serial.log',
    archiveSocket: '/r/archive.sock',
  });
}

/** Every value a flag is given, in order. */
const values = (args: string[], flag: string) => args.flatMap((a, i) => (args[i - 1] === flag ? [a] : []));

test('by default a guest is an i440fx PC with SeaBIOS: no pflash drives', () => {
  const args = command(BASE);
  expect(values(args, '-machine')).toEqual(['type=pc']);
  expect(args.join(' ')).not.toContain('pflash');
});

test('ovmf + q35 + an extra disk: the Secure Boot capable 4 MiB OVMF over the EFI disk, the data disk on the SCSI controller', () => {
  const conf = `${BASE}bios: ovmf
efidisk0: local-lvm:vm-130-disk-1,efitype=4m,pre-enrolled-keys=0,size=4M
machine: q35
scsi1: local-lvm:vm-130-disk-2,size=1G
`;
  const args = command(conf, {
    disks: [...DISKS, { key: 'scsi1', file: '/d/vm-130-disk-2', format: 'raw', cdrom: false }],
    efiVars: { file: '/d/vm-130-disk-1', format: 'raw' },
  });
  expect(values(args, '-machine')).toEqual(['type=q35']);
  // OVMF.pm: q35 means SMM, so efitype=4m boots the secboot build; without keys it does not enforce.
  expect(values(args, '-drive').filter((d) => d.startsWith('if=pflash'))).toEqual([
    'if=pflash,unit=0,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd',
    // An LVM volume is 4 MiB: the flash shows only the vars' 528 KiB of it.
    'if=pflash,unit=1,id=drive-efidisk0,format=raw,file=/d/vm-130-disk-1,size=540672',
  ]);
  const devices = values(args, '-device');
  expect(devices.filter((d) => d.startsWith('virtio-scsi-pci'))).toEqual(['virtio-scsi-pci,id=scsihw0']);
  expect(devices).toContain('scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1');
  expect(values(args, '-drive')).toContain('file=/d/vm-130-disk-2,if=none,id=drive-scsi1,format=raw,cache=unsafe,discard=on');
  // The cloud-init drive stays ide2 on q35's AHCI: bus ide.1, unit 0.
  expect(devices).toContain('ide-cd,bus=ide.1,unit=0,drive=drive-ide2,id=ide2');
});

test('the other OVMF builds: no SMM on i440fx, Microsoft keys when pre-enrolled, the legacy 2 MiB one without efitype', () => {
  const pflash = (conf: string, efiVars: EfiVars = { file: '/d/vars', format: 'qcow2' }) =>
    values(command(`${BASE}bios: ovmf\n${conf}`, { efiVars }), '-drive').filter((d) => d.startsWith('if=pflash'));
  expect(pflash('efidisk0: local:130/vm-130-disk-1.qcow2,efitype=4m,pre-enrolled-keys=1\n')).toEqual([
    'if=pflash,unit=0,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd',
    // qcow2 has a size of its own: no size= (OVMF.pm adds it to raw volumes only).
    'if=pflash,unit=1,id=drive-efidisk0,format=qcow2,file=/d/vars',
  ]);
  // No efidisk0: the supervisor's throw-away copy of the 2 MiB vars (qm start warns).
  expect(pflash('', { file: '/g/ovmf-vars.fd', format: 'raw' })).toEqual([
    'if=pflash,unit=0,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE.fd',
    'if=pflash,unit=1,id=drive-efidisk0,format=raw,file=/g/ovmf-vars.fd,size=131072',
  ]);
  expect(() => command(`${BASE}bios: ovmf\n`)).toThrow(/EFI vars/);
});

test('machine types: versioned ones lose the +pve suffix and .pxe this QEMU does not know, options are not the type', () => {
  const machine = (m: string) => values(command(`${BASE}machine: ${m}\n`), '-machine');
  expect(machine('pc-q35-7.2+pve0')).toEqual(['type=pc-q35-7.2']);
  expect(machine('pc-i440fx-7.1.pxe')).toEqual(['type=pc-i440fx-7.1']);
  expect(machine('type=q35,viommu=virtio')).toEqual(['type=q35']);
});

test('q35 moves an odd IDE index two buses up, as DriveDevice.pm does; i440fx keeps two units a bus', () => {
  const disks: GuestDisk[] = [{ key: 'ide1', file: '/d/iso', format: 'raw', cdrom: true }];
  expect(values(command(`${BASE}machine: q35\n`, { disks }), '-device')).toContain('ide-cd,bus=ide.2,unit=0,drive=drive-ide1,id=ide1');
  expect(values(command(BASE, { disks }), '-device')).toContain('ide-cd,bus=ide.0,unit=1,drive=drive-ide1,id=ide1');
});

test('SCSI controllers as scsihw_infos lays them out: LSI by SCSI ID, seven a controller; virtio-scsi-single one a disk', () => {
  const disks: GuestDisk[] = [0, 7].map((n) => ({ key: `scsi${n}`, file: `/d/${n}`, format: 'raw', cdrom: false }));
  const lsi = values(command(BASE.replace('scsihw: virtio-scsi-pci\n', ''), { disks }), '-device');
  expect(lsi).toEqual(expect.arrayContaining(['lsi53c895a,id=scsihw0', 'lsi53c895a,id=scsihw1']));
  expect(lsi).toContain('scsi-hd,bus=scsihw0.0,scsi-id=0,drive=drive-scsi0,id=scsi0,bootindex=100');
  expect(lsi).toContain('scsi-hd,bus=scsihw1.0,scsi-id=0,drive=drive-scsi7,id=scsi7');
  const single = values(command(BASE.replace('virtio-scsi-pci', 'virtio-scsi-single'), { disks }), '-device');
  expect(single).toEqual(expect.arrayContaining(['virtio-scsi-pci,id=virtioscsi0', 'virtio-scsi-pci,id=virtioscsi7']));
  expect(single).toContain('scsi-hd,bus=virtioscsi7.0,channel=0,scsi-id=0,lun=7,drive=drive-scsi7,id=scsi7');
});
