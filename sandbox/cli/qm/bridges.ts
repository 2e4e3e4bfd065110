import { CliError } from '../errors';
import type { Ctx } from '../context';
import type { VmConf } from '../../state/vmconf';
import { nodeBridges } from '../../state/model';

/**
 * What starting a VM does with a `netN` whose bridge the node does not have. Neither
 * `qm create` nor `qm set` looks at the host's bridges (qemu-server API2/Qemu.pm checks
 * only SDN.Use); the VM fails at start, when QEMU runs the tap's ifup script
 * (`/usr/libexec/qemu-server/pve-bridge` → pve-network `PVE::Network::SDN::Zones::tap_create`
 * → pve-common `PVE::Network::tap_create` → `read_bridge_mtu`: `bridge '<b>' does not
 * exist`), QEMU reports the script's exit status 2 (`failed with status 512`) and exits 1,
 * and vm_start dies `start failed: QEMU exited with code 1` (qemu-server
 * `PVE/QemuServer.pm`, `vm_start_nolock`; the netdev string from `print_netdev_full`).
 */
export function plugNetworks(ctx: Ctx, vmid: number, conf: VmConf): void {
  const bridges = nodeBridges(ctx.model, ctx.node);
  for (const key of Object.keys(conf.props).filter((k) => /^net\d+$/.test(k)).sort((a, b) => Number(a.slice(3)) - Number(b.slice(3)))) {
    const parts = conf.props[key].split(',');
    const bridge = parts.find((p) => p.startsWith('bridge='))?.slice('bridge='.length);
    if (bridge === undefined || bridges.includes(bridge)) continue;
    const model = parts[0].split('=')[0];
    const vhost = model === 'virtio' ? ',vhost=on' : '';
    ctx.out(`bridge '${bridge}' does not exist`);
    ctx.out(
      `kvm: -netdev type=tap,id=${key},ifname=tap${vmid}i${key.slice(3)},script=/usr/libexec/qemu-server/pve-bridge,downscript=/usr/libexec/qemu-server/pve-bridgedown${vhost}: network script /usr/libexec/qemu-server/pve-bridge failed with status 512`,
    );
    throw new CliError('start failed: QEMU exited with code 1');
  }
}
