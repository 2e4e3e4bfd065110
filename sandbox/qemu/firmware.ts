import { parsePropertyString, type VmConf } from '../state/vmconf';

/**
 * The firmware and machine of a real guest, chosen from its config as qemu-server chooses
 * them (QemuServer/OVMF.pm `get_ovmf_files`, QemuServer/Machine.pm). OVMF comes from
 * Debian's `ovmf` package instead of pve-edk2-firmware: the same edk2 builds under the
 * same names, in /usr/share/OVMF instead of /usr/share/pve-edk2-firmware.
 */
export const OVMF_DIR = '/usr/share/OVMF';

export interface OvmfFiles {
  /** The firmware, read-only on pflash unit 0. */
  code: string;
  /** The template an EFI disk starts as (and a VM without one boots a copy of). */
  vars: string;
  /** The template's size: pflash unit 1 shows only that much of a raw EFI disk. */
  varsBytes: number;
}

/** `machine: [type=]<type>,…`: the type, `pc` when unset. */
export function machineType(conf: VmConf): string {
  return parsePropertyString(conf.props.machine ?? '', 'type').type || 'pc';
}

/** Machine.pm `machine_type_is_q35`. */
export function isQ35(conf: VmConf): boolean {
  return /q35/.test(machineType(conf));
}

/**
 * The `-machine type=` QEMU is given. Proxmox pins `pc`/`q35` to its QEMU's newest
 * versioned type with a `+pveN` suffix of its own patches; this QEMU has no such suffixes,
 * so they go, and so does `.pxe` (a ROM choice, not a machine). An unversioned type stays
 * as it is: it is the newest this QEMU has.
 */
export function qemuMachineType(conf: VmConf): string {
  return machineType(conf).replace(/\.pxe$/, '').replace(/\+pve\d+$/, '');
}

/** The OVMF vars templates' sizes: what a new EFI disk holds, by `efitype` (qemu-server OVMF.pm). */
export const OVMF_VARS_BYTES = { '4m': 540672, '2m': 131072 } as const;

/**
 * `efitype=4m` boots the 4 MiB builds, with Secure Boot support (which needs SMM) on q35
 * only; `pre-enrolled-keys=1` starts from the vars with Microsoft's keys enrolled. Anything
 * else, and a VM without an EFI disk, boots the legacy 2 MiB build.
 */
export function ovmfFiles(conf: VmConf): OvmfFiles {
  const efidisk = conf.props.efidisk0 !== undefined ? parsePropertyString(conf.props.efidisk0, 'file') : undefined;
  if (efidisk?.efitype === '4m') {
    const msKeys = /^(1|yes|on|true)$/.test(efidisk['pre-enrolled-keys'] ?? '');
    return {
      code: `${OVMF_DIR}/${isQ35(conf) ? 'OVMF_CODE_4M.secboot.fd' : 'OVMF_CODE_4M.fd'}`,
      vars: `${OVMF_DIR}/${msKeys ? 'OVMF_VARS_4M.ms.fd' : 'OVMF_VARS_4M.fd'}`,
      varsBytes: OVMF_VARS_BYTES['4m'],
    };
  }
  return { code: `${OVMF_DIR}/OVMF_CODE.fd`, vars: `${OVMF_DIR}/OVMF_VARS.fd`, varsBytes: OVMF_VARS_BYTES['2m'] };
}
