import type { Params } from './http';

/**
 * The privilege an API call needs, for the 403s where Proxmox names none (`create_vm`
 * answers a bare `Permission check failed`). From the permission checks of pve-manager and
 * qemu-server for the calls QemuRun makes; undefined for calls not listed.
 */
export function requiredPrivilege(method: string, path: string, params: Params): { privilege: string; path: string } | undefined {
  let m: RegExpExecArray | null;
  if (method === 'POST' && (m = /^\/nodes\/[^/]+\/qemu$/.exec(path))) return { privilege: 'VM.Allocate', path: `/vms/${params.vmid ?? '<vmid>'}` };
  if ((m = /^\/nodes\/[^/]+\/qemu\/(\d+)(\/.*)?$/.exec(path))) {
    const vm = `/vms/${m[1]}`;
    const sub = m[2] ?? '';
    if (method === 'DELETE' && sub === '') return { privilege: 'VM.Allocate', path: vm };
    // qemu-server PVE/API2/Qemu/Agent.pm, whose 403s name the privilege themselves; the
    // release decides which.
    if (sub === '/agent/file-read') return { privilege: 'VM.GuestAgent.FileRead (Proxmox VE 9; VM.Monitor on 8)', path: vm };
    if (sub.startsWith('/agent/')) return { privilege: 'VM.GuestAgent.Audit (Proxmox VE 9; VM.Monitor on 8)', path: vm };
    if (sub === '/migrate') return { privilege: 'VM.Migrate', path: vm };
    // qemu-server PVE/API2/Qemu.pm clone_vm and template.
    if (sub === '/clone') return { privilege: `VM.Clone (and VM.Allocate on /vms/${params.newid ?? '<newid>'})`, path: vm };
    if (sub === '/template') return { privilege: 'VM.Allocate', path: vm };
    if (/^\/status\/(?:start|stop|shutdown|reboot)$/.test(sub)) return { privilege: 'VM.PowerMgmt', path: vm };
    // qemu-server PVE/API2/Qemu.pm, resize_vm: VM.Config.Disk on the VM, then
    // Datastore.AllocateSpace on the disk's storage.
    if (sub === '/resize') return { privilege: 'VM.Config.Disk (and Datastore.AllocateSpace on the disk\'s storage)', path: vm };
    if (sub === '/config' && method !== 'GET') return { privilege: `VM.Config.* for ${Object.keys(params).join(', ') || 'the options'}`, path: vm };
    if (method === 'GET') return { privilege: 'VM.Audit', path: vm };
  }
  if ((m = /^\/nodes\/([^/]+)\/storage\/([^/]+)\/download-url$/.exec(path))) {
    return { privilege: `Datastore.AllocateTemplate on /storage/${m[2]}, and Sys.Audit with Sys.Modify on / (or Sys.AccessNetwork on /nodes/${m[1]})`, path: `/storage/${m[2]}` };
  }
  if ((m = /^\/nodes\/[^/]+\/storage\/([^/]+)/.exec(path))) return { privilege: 'Datastore.Audit', path: `/storage/${m[1]}` };
  if ((m = /^\/nodes\/([^/]+)\/status$/.exec(path))) return { privilege: 'Sys.Audit', path: `/nodes/${m[1]}` };
  return undefined;
}
