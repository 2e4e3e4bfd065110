import type { VmConf } from './vmconf';

/**
 * The disk a VM boots from. qemu-server passes only the devices of `boot: order=...` to
 * QEMU (with strict boot), so the first disk in that list is the boot disk; the legacy
 * `boot: c` form uses `bootdisk`. A VM whose order holds no disk (e.g. `order=net0`,
 * what `qm create` writes before a disk is attached) boots nothing.
 */
export function bootDisk(conf: VmConf): string | undefined {
  const isDisk = (key: string) =>
    /^(ide|sata|scsi|virtio)\d+$/.test(key) && conf.props[key] !== undefined && !/(^|,)media=cdrom(,|$)/.test(conf.props[key]);
  const boot = conf.props.boot ?? '';
  const order = /(?:^|,)order=([^,]*)/.exec(boot);
  if (order) return order[1].split(';').find(isDisk);
  const legacy = boot === '' || /^[acdn]+$/.test(boot) ? boot || 'cdn' : '';
  const bootdisk = conf.props.bootdisk;
  return legacy.includes('c') && bootdisk && isDisk(bootdisk) ? bootdisk : undefined;
}
