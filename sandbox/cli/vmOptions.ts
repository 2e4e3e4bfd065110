import type { Prop } from './args';
import * as f from './formats';

/**
 * The VM config options the sandbox understands, with qemu-server's types and limits.
 * `qm create` and `qm set` share them (as the API's create_vm and update_vm do).
 */

export const DRIVE_NAMES: string[] = [
  ...Array.from({ length: 4 }, (_, i) => `ide${i}`),
  ...Array.from({ length: 6 }, (_, i) => `sata${i}`),
  ...Array.from({ length: 31 }, (_, i) => `scsi${i}`),
  ...Array.from({ length: 16 }, (_, i) => `virtio${i}`),
  'efidisk0',
  'tpmstate0',
];

export const isDriveName = (k: string) => DRIVE_NAMES.includes(k);

const SCSIHW = ['lsi', 'lsi53c810', 'virtio-scsi-pci', 'virtio-scsi-single', 'megasas', 'pvscsi'];
const OSTYPES = ['other', 'wxp', 'w2k', 'w2k3', 'w2k8', 'wvista', 'win7', 'win8', 'win10', 'win11', 'l24', 'l26', 'solaris'];

const str: Prop = { type: 'string', optional: true };
const bool: Prop = { type: 'boolean', optional: true };

export const VM_OPTIONS: Record<string, Prop> = {
  name: { ...str, format: f.dnsName },
  description: { ...str, maxLength: 8192 },
  tags: { ...str, format: f.tagList },
  cores: { type: 'integer', optional: true, minimum: 1 },
  sockets: { type: 'integer', optional: true, minimum: 1 },
  vcpus: { type: 'integer', optional: true, minimum: 1 },
  cpu: { ...str, format: f.cpuConf },
  cpulimit: { type: 'number', optional: true, minimum: 0, maximum: 128 },
  cpuunits: { type: 'integer', optional: true, minimum: 1, maximum: 262144 },
  memory: { type: 'integer', optional: true, minimum: 16 },
  balloon: { type: 'integer', optional: true, minimum: 0 },
  shares: { type: 'integer', optional: true, minimum: 0, maximum: 50000 },
  numa: bool,
  scsihw: { ...str, enum: SCSIHW },
  ostype: { ...str, enum: OSTYPES },
  agent: { ...str, format: f.agent },
  serial0: { ...str, format: f.serial },
  serial1: { ...str, format: f.serial },
  vga: str,
  bios: { ...str, enum: ['seabios', 'ovmf'] },
  machine: { ...str, format: f.machine },
  boot: str,
  bootdisk: { ...str, enum: DRIVE_NAMES },
  onboot: bool,
  protection: bool,
  template: bool,
  kvm: bool,
  acpi: bool,
  hotplug: str,
  smbios1: { ...str, maxLength: 512, format: f.smbios1 },
  vmgenid: str,
  startup: str,
  ciuser: str,
  cipassword: str,
  ciupgrade: bool,
  citype: { ...str, enum: ['configdrive2', 'nocloud', 'opennebula'] },
  cicustom: { ...str, format: f.cicustom },
  sshkeys: str,
  nameserver: { ...str, format: f.addressList },
  searchdomain: str,
  ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`net${i}`, { ...str, format: f.net }])),
  ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`ipconfig${i}`, { ...str, format: f.ipconfig }])),
  ...Object.fromEntries(DRIVE_NAMES.map((d) => [d, str])),
};

export const VMID: Prop = { type: 'integer', format: f.vmidFormat };

/**
 * A command's options as a node's qemu-server knows them: `ciupgrade` came with
 * qemu-server 8.0.2, so a node still on Proxmox VE 7 refuses it as an unknown option.
 */
export function optionsOnRelease(props: Record<string, Prop>, pveRelease: string): Record<string, Prop> {
  if (Number(pveRelease.split('.')[0]) >= 8) return props;
  const { ciupgrade: _added, ...older } = props;
  return older;
}
