import type { VmConf } from '../state/vmconf';
import { netMac } from '../state/cloudinit';
import { userNetdev } from './network';

/**
 * The `qemu-system-x86_64` command line of a real guest, built from its config the way
 * qemu-server's `config_to_command` names things (`drive-scsi0` on `scsihw0`, `ide2` as a
 * CD-ROM, `net0`, the guest agent's `org.qemu.guest_agent.0` port, `serial0` as a socket,
 * QMP on a socket), so what a guest sees matches a Proxmox VM of the same config. What
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

export interface QemuCommandInput {
  vmid: number;
  conf: VmConf;
  disks: GuestDisk[];
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
    '-machine', 'type=pc',
    '-accel', input.accel === 'kvm' ? 'kvm' : 'tcg,thread=multi',
    '-cpu', input.accel === 'kvm' ? 'host' : 'max',
    '-smp', `${cores},sockets=${p.sockets ?? 1},cores=${p.cores ?? 1},maxcpus=${cores}`,
    '-m', String(Number(p.memory ?? 512)),
    '-boot', 'menu=on,strict=on,reboot-timeout=1000',
    '-display', 'none',
  ];
  const uuid = /(?:^|,)uuid=([0-9a-f-]{36})/i.exec(p.smbios1 ?? '')?.[1];
  if (uuid) args.push('-smbios', `type=1,uuid=${uuid}`);

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

  const scsihw = p.scsihw ?? 'lsi';
  let scsiController = false;
  for (const d of input.disks) {
    const [, bus, n] = /^([a-z]+)(\d+)$/.exec(d.key)!;
    const index = Number(n);
    const bi = boot.get(d.key);
    const bootindex = bi !== undefined ? `,bootindex=${bi}` : '';
    args.push('-drive', `file=${d.file},if=none,id=drive-${d.key},format=${d.format}${d.cdrom ? ',media=cdrom' : ',cache=unsafe,discard=on'}`);
    if (bus === 'scsi') {
      if (!scsiController) {
        args.push('-device', `${scsihw === 'virtio-scsi-pci' || scsihw === 'virtio-scsi-single' ? 'virtio-scsi-pci' : 'lsi53c895a'},id=scsihw0`);
        scsiController = true;
      }
      args.push('-device', `${d.cdrom ? 'scsi-cd' : 'scsi-hd'},bus=scsihw0.0,channel=0,scsi-id=0,lun=${index},drive=drive-${d.key},id=${d.key}${bootindex}`);
    } else if (bus === 'ide') {
      args.push('-device', `${d.cdrom ? 'ide-cd' : 'ide-hd'},bus=ide.${index >> 1},unit=${index & 1},drive=drive-${d.key},id=${d.key}${bootindex}`);
    } else if (bus === 'virtio') {
      args.push('-device', `virtio-blk-pci,drive=drive-${d.key},id=${d.key}${bootindex}`);
    } else if (bus === 'sata') {
      if (!args.includes('ahci,id=ahci0')) args.push('-device', 'ahci,id=ahci0');
      args.push('-device', `${d.cdrom ? 'ide-cd' : 'ide-hd'},bus=ahci0.${index},drive=drive-${d.key},id=${d.key}${bootindex}`);
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
