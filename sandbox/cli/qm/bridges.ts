import { CliError } from '../errors';
import type { Ctx } from '../context';
import type { VmConf } from '../../state/vmconf';
import { majorOf, nodeBridges, nodePveVersion } from '../../state/model';
import { parsePropertyString } from '../../state/vmconf';

/** What `/sys/class/net/<bridge>/mtu` holds for every bridge of the sandbox: Linux's default. */
export const BRIDGE_MTU = 1500;

const netKeys = (conf: VmConf) =>
  Object.keys(conf.props)
    .filter((k) => /^net\d+$/.test(k))
    .sort((a, b) => Number(a.slice(3)) - Number(b.slice(3)));

/**
 * What config_to_command does with each NIC before QEMU is spawned (qemu-server
 * `print_netdevice_full`): for a VirtIO NIC on a bridge it reads the bridge's MTU
 * (`read_bridge_mtu`, which dies `bridge '<b>' does not exist`) and refuses an `mtu`
 * below 576 or above the bridge's. qemu-server 7 and 8 do so only when the NIC has an
 * `mtu`; from 9.0.3 (PVE 9) for every VirtIO NIC on a bridge. `mtu=1` means the bridge's.
 * The error ends `qm start` as it is: no `start failed:` and no kvm line.
 */
export function checkNetdevMtus(ctx: Ctx, conf: VmConf): void {
  const always = majorOf(nodePveVersion(ctx.model, ctx.node).release) >= 9;
  const bridges = nodeBridges(ctx.model, ctx.node);
  for (const key of netKeys(conf)) {
    const value = conf.props[key];
    const model = value.split(',')[0].split('=')[0];
    const net = parsePropertyString(value.split(',').slice(1).join(','));
    if ((model !== 'virtio' && !(model === 'model' && value.startsWith('model=virtio'))) || net.bridge === undefined) continue;
    if (net.mtu === undefined && !always) continue;
    if (!bridges.includes(net.bridge)) throw new CliError(`bridge '${net.bridge}' does not exist`);
    const mtu = net.mtu === undefined ? 1 : Number(net.mtu);
    if (mtu === 1) continue;
    if (mtu < 576) throw new CliError(`netdev ${key}: MTU '${mtu}' is smaller than the IP minimum MTU '576'`);
    if (mtu > BRIDGE_MTU) {
      throw new CliError(
        `netdev ${key}: MTU '${mtu}' is bigger than the bridge MTU '${BRIDGE_MTU}' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.`,
      );
    }
  }
}

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
  for (const key of netKeys(conf)) {
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
