import type { VmConf } from '../state/vmconf';
import { netMac } from '../state/cloudinit';
import { userNetdev } from './network';
import { isQ35, ovmfFiles, qemuMachineType } from './firmware';

/**
 * The `qemu-system-x86_64` command line of a real guest, built from its config the way
 * qemu-server's `config_to_command` names things (`drive-scsi0` on `scsihw0`, `ide2` as a
 * CD-ROM, `net0`, the guest agent's `org.qemu.guest_agent.0` port, `serial0` as a socket,
 * QMP on a socket, `machine` and the OVMF pflash drives of `bios: ovmf` as ./firmware.ts
 * chooses them), so what a guest sees matches a Proxmox VM of the same config. What
 * differs, and why: the CPU is `max` under TCG and `host` under KVM (qemu-server's named
 * models such as x86-64-v2-AES are its own definitions), there is no VGA or VNC (nothing
 * here reads a screen), disks ignore the guest's flushes (`cache=unsafe`: a sandbox disk
 * is thrown away, and under emulation every fsync of a package install costs), and the
 * NICs sit on QEMU's user network (./network.ts).
 */
export interface GuestDisk {
  /** The drive key, e.g. scsi0, ide2. */
  key: string;
  file: string;
  format: string;
  cdrom: boolean;
}

/** The EFI vars a `bios: ovmf` guest boots with: its efidisk0 volume, or a throw-away copy. */
export interface EfiVars {
  file: string;
  format: string;
}

export interface QemuCommandInput {
  vmid: number;
  conf: VmConf;
  disks: GuestDisk[];
  /** Needed when the config says `bios: ovmf`. */
  efiVars?: EfiVars;
  accel: 'kvm' | 'tcg';
  qmpSocket: string;
  qgaSocket: string;
  serialSocket: string;
  serialLog: string;
  archiveSocket: string;
  /** Where net0's SSH is forwarded from: the VM's address as QemuRun knows it. */
  sshFrom?: { host: string; port: number };
}

const NIC_DEVICE: Record<string, string> = { virtio: 'virtio-net-pci', e1000: 'e1000', e1000e: 'e1000e', rtl8139: 'rtl8139', vmxnet3: 'vmxnet3' };

/** `agent: 1` or `agent: enabled=1,…` (PVE's `parse_guest_agent`). */
export function agentEnabled(conf: VmConf): boolean {
  const v = conf.props.agent;
  if (v === undefined) return false;
  const enabled = /^(?:enabled=)?([^,]*)/.exec(v)?.[1];
  return enabled === '1' || enabled === 'yes' || enabled === 'on' || enabled === 'true';
}

/** Boot order: `order=scsi0;ide2;net0` gives each listed device its bootindex. */
function bootIndexes(conf: VmConf): Map<string, number> {
  const order = /(?:^|,)order=([^,]*)/.exec(conf.props.boot ?? '')?.[1]?.split(';') ?? [];
  return new Map(order.map((dev, i) => [dev, 100 + i]));
}

export function qemuCommand(input: QemuCommandInput): string[] {
  const { conf, vmid } = input;
  const p = conf.props;
  const cores = Number(p.cores ?? 1) * Number(p.sockets ?? 1);
  const boot = bootIndexes(conf);
  const args = [
    '-name', `${(p.name ?? `VM${vmid}`).replace(/,/g, '')},debug-threads=on`,
    '-no-user-config', '-nodefaults',
    '-chardev', `socket,id=qmp,path=${input.qmpSocket},server=on,wait=off`,
    '-mon', 'chardev=qmp,mode=control',
    '-machine', `type=${qemuMachineType(conf)}`,
    '-accel', input.accel === 'kvm' ? 'kvm' : 'tcg,thread=multi',
    '-cpu', input.accel === 'kvm' ? 'host' : 'max',
    '-smp', `${cores},sockets=${p.sockets ?? 1},cores=${p.cores ?? 1},maxcpus=${cores}`,
    '-m', String(Number(p.memory ?? 512)),
    '-boot', 'menu=on,strict=on,reboot-timeout=1000',
    '-display', 'none',
  ];
  const uuid = /(?:^|,)uuid=([0-9a-f-]{36})/i.exec(p.smbios1 ?? '')?.[1];
  if (uuid) args.push('-smbios', `type=1,uuid=${uuid}`);
  if (p.bios === 'ovmf') args.push(...ovmfDrives(conf, input.efiVars));

  if (agentEnabled(conf)) {
    args.push(
      '-chardev', `socket,path=${input.qgaSocket},server=on,wait=off,id=qga0`,
      '-device', 'virtio-serial,id=qga0',
      '-device', 'virtserialport,chardev=qga0,name=org.qemu.guest_agent.0',
    );
  }
  if (p.serial0 === 'socket') {
    args.push('-chardev', `socket,id=serial0,path=${input.serialSocket},server=on,wait=off,logfile=${input.serialLog},logappend=on`, '-device', 'isa-serial,chardev=serial0');
  }

  const controllers = new Set<string>();
  const controller = (id: string, device: string) => {
    if (!controllers.has(id)) args.push('-device', `${device},id=${id}`);
    controllers.add(id);
  };
  for (const d of input.disks) {
    const [, bus, n] = /^([a-z]+)(\d+)$/.exec(d.key)!;
    const index = Number(n);
    const bi = boot.get(d.key);
    const tail = `drive=drive-${d.key},id=${d.key}${bi !== undefined ? `,bootindex=${bi}` : ''}`;
    args.push('-drive', `file=${d.file},if=none,id=drive-${d.key},format=${d.format}${d.cdrom ? ',media=cdrom' : ',cache=unsafe,discard=on'}`);
    if (bus === 'scsi') {
      const hw = scsiController(p.scsihw, index);
      controller(hw.id, hw.device);
      const address = hw.lun ? `channel=0,scsi-id=0,lun=${index}` : `scsi-id=${hw.unit}`;
      args.push('-device', `${d.cdrom ? 'scsi-cd' : 'scsi-hd'},bus=${hw.id}.0,${address},${tail}`);
    } else if (bus === 'ide') {
      // DriveDevice.pm: q35's AHCI has one unit per bus, so an odd index moves two buses up.
      let ctl = index >> 1;
      let unit = index & 1;
      if (isQ35(conf)) [ctl, unit] = [ctl + 2 * unit, 0];
      args.push('-device', `${d.cdrom ? 'ide-cd' : 'ide-hd'},bus=ide.${ctl},unit=${unit},${tail}`);
    } else if (bus === 'virtio') {
      args.push('-device', `virtio-blk-pci,${tail}`);
    } else if (bus === 'sata') {
      controller('ahci0', 'ahci');
      args.push('-device', `${d.cdrom ? 'ide-cd' : 'ide-hd'},bus=ahci0.${index},${tail}`);
    }
  }

  for (const key of Object.keys(p).filter((k) => /^net\d+$/.test(k)).sort()) {
    const model = p[key].split(',')[0].split('=')[0];
    const mac = netMac(p[key]);
    const bi = boot.get(key);
    args.push(
      '-netdev', userNetdev(key, { sshFrom: key === 'net0' ? input.sshFrom : undefined, archiveSocket: input.archiveSocket }),
      '-device', `${NIC_DEVICE[model] ?? 'virtio-net-pci'},${mac ? `mac=${mac},` : ''}netdev=${key},id=${key}${bi !== undefined ? `,bootindex=${bi}` : ''}`,
    );
  }
  return args;
}

const SCSI_DEVICE: Record<string, string> = { lsi: 'lsi53c895a', lsi53c810: 'lsi53c810', megasas: 'megasas', pvscsi: 'pvscsi' };

/**
 * DriveDevice.pm `scsihw_infos`: an LSI controller holds 7 disks addressed by SCSI ID,
 * virtio-scsi-pci 256 addressed by LUN, virtio-scsi-single one per controller.
 */
function scsiController(scsihw: string | undefined, index: number): { id: string; device: string; unit: number; lun: boolean } {
  const hw = scsihw ?? 'lsi';
  const single = hw === 'virtio-scsi-single';
  const maxdev = hw.startsWith('lsi') ? 7 : single ? 1 : 256;
  return {
    id: `${single ? 'virtioscsi' : 'scsihw'}${Math.floor(index / maxdev)}`,
    device: hw.startsWith('virtio-scsi') ? 'virtio-scsi-pci' : (SCSI_DEVICE[hw] ?? 'lsi53c895a'),
    unit: index % maxdev,
    lun: !hw.startsWith('lsi') && hw !== 'pvscsi',
  };
}

/**
 * OVMF.pm `print_ovmf_drive_commandlines`: the firmware read-only on pflash unit 0, the
 * VM's vars on unit 1 (a raw volume may be larger than the vars, as an LVM volume is, so
 * QEMU is told the vars' size).
 */
function ovmfDrives(conf: VmConf, vars: EfiVars | undefined): string[] {
  if (!vars) throw new Error('bios: ovmf needs the EFI vars to boot with');
  const files = ovmfFiles(conf);
  return [
    '-drive', `if=pflash,unit=0,format=raw,readonly=on,file=${files.code}`,
    '-drive', `if=pflash,unit=1,id=drive-efidisk0,format=${vars.format},file=${vars.file}${vars.format === 'raw' ? `,size=${files.varsBytes}` : ''}`,
  ];
}
