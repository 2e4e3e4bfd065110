import { withInstanceSealed } from '../../contract';
import type { Config } from '../config';
import type { ProxmoxCluster } from '../proxmox';
import { vmInstanceOf } from '../proxmox/vmInstance';
import { markersResealed, recordMarkersResealed } from '../stateFiles';
import { markerSealFor } from './markerSeal';

/**
 * The upgrade to seals that name the VM instance. Markers sealed before it cover the VMID but
 * not which VM: a destroyed VM's Notes pasted into a later VM at its VMID would pass. Refusing
 * them at once would take every VM out of the managed set; accepting them for ever would keep
 * that hole open. So the worker seals each VM carrying valid markers of the old form again,
 * with the uuid its smbios1 names now, and once a pass has reached every VM it records that in
 * DATA_DIR (`markers-resealed`): from then on the old form is refused (lib/vm/markerSeal.ts).
 *
 * A pass that could not read or write some VM records nothing, so the next start tries again
 * and the old form stays valid until then. A VM without an SMBIOS uuid cannot be resealed: it
 * is named, and leaves the managed set once the pass is recorded (adopt it after giving it a uuid).
 */
export async function resealLegacyMarkers(
  config: Pick<Config, 'encryption' | 'dataDir'>,
  proxmox: ProxmoxCluster,
  warn: (message: string) => void,
): Promise<{ resealed: number[]; recorded: boolean }> {
  if (markersResealed(config.dataDir)) return { resealed: [], recorded: true };
  const seal = markerSealFor(config);
  const resealed: number[] = [];
  const failed: string[] = [];
  for (const vm of await proxmox.vms()) {
    const node = proxmox.node(vm.node);
    if (!node) {
      failed.push(`VM ${vm.vmid}: its node ${vm.node} is not reachable from this worker`);
      continue;
    }
    try {
      const conf = await node.config(vm.vmid);
      const check = seal.check(conf, vm.vmid, { acceptLegacy: true });
      if (!check.sealed || check.fields.instance !== undefined) continue;
      const instance = vmInstanceOf(conf);
      if (instance === undefined) {
        warn(`VM ${vm.vmid}: its markers cannot be sealed for its instance, it has no SMBIOS uuid (smbios1); it leaves the managed set: give it a uuid and adopt it`);
        continue;
      }
      // Read again just before writing: a VM at that VMID since the first read is not the one verified.
      if (vmInstanceOf(await node.config(vm.vmid)) !== instance) continue;
      const description = withInstanceSealed(conf.description!, instance, seal.seal({ ...check.fields, instance }));
      await node.setVmOptions(vm.vmid, { description });
      resealed.push(vm.vmid);
    } catch (err) {
      failed.push(`VM ${vm.vmid}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  if (failed.length > 0) {
    warn(`markers sealed without their VM instance are still accepted: these VMs could not be resealed, the next start tries again: ${failed.join('; ')}`);
    return { resealed, recorded: false };
  }
  recordMarkersResealed(config.dataDir, `markers sealed for their VM instance at ${new Date().toISOString()}; VMs resealed: ${resealed.join(' ') || 'none'}`);
  return { resealed, recorded: true };
}
