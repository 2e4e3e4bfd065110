import type { VmConfig } from './vmConfig';

/**
 * Which VM lives at a VMID: the SMBIOS uuid in `smbios1`. A VMID is reused once its VM is
 * destroyed, so "VM 120" names a different machine over time; the uuid does not. qemu-server
 * writes a fresh one on `qm create` (unless the caller gave smbios1), on every clone and on
 * an import, and keeps it across migration, so it names one VM instance for its whole life.
 * Undefined when the VM has none (smbios1 deleted by hand).
 */
export function vmInstanceOf(conf: Pick<VmConfig, 'entries'>): string | undefined {
  const smbios1 = conf.entries.smbios1;
  if (smbios1 === undefined) return undefined;
  const uuid = /(?:^|,)uuid=([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})(?:,|$)/.exec(String(smbios1))?.[1];
  return uuid?.toLowerCase();
}
